package envvar

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type spec struct {
	Text     string        `envconfig:"ENVVAR_TEST_TEXT" default:"t" desc:"a text"`
	Number   int           `envconfig:"ENVVAR_TEST_NUMBER" default:"5" desc:"a number"`
	Duration time.Duration `envconfig:"ENVVAR_TEST_DURATION" default:"2s" desc:"a duration"`
	Switch   bool          `envconfig:"ENVVAR_TEST_SWITCH" default:"true" blank:"false" desc:"a switch"`
	Level    string        `envconfig:"ENVVAR_TEST_LEVEL" default:"info" blank:"default" desc:"a level"`
	List     List          `envconfig:"ENVVAR_TEST_LIST" default:"a,b" desc:"a list"`
	Port     Port          `envconfig:"ENVVAR_TEST_PORT" default:"8080" desc:"a port"`
}

// setenv sets the variables for the test, every other one of spec unset.
func setenv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, v := range Describe(&spec{}) {
		t.Setenv(v.Name, "")
		require.NoError(t, os.Unsetenv(v.Name))
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func TestReadDefaults(t *testing.T) {
	setenv(t, nil)
	var s spec
	require.NoError(t, Read(&s))
	assert.Equal(t, spec{Text: "t", Number: 5, Duration: 2 * time.Second, Switch: true, Level: "info", List: List{"a", "b"}, Port: 8080}, s)
}

// TestReadBlank: a blank number, duration, list or port means its default; blank
// text is the value; a `blank` tag says what else a blank means.
func TestReadBlank(t *testing.T) {
	env := map[string]string{}
	for _, v := range Describe(&spec{}) {
		env[v.Name] = ""
	}
	setenv(t, env)
	var s spec
	require.NoError(t, Read(&s))
	assert.Equal(t, spec{Text: "", Number: 5, Duration: 2 * time.Second, Switch: false, Level: "info", List: List{"a", "b"}, Port: 8080}, s)
}

func TestReadValues(t *testing.T) {
	setenv(t, map[string]string{"ENVVAR_TEST_NUMBER": "0x10", "ENVVAR_TEST_LIST": " x, y,,z ,", "ENVVAR_TEST_PORT": "9090"})
	var s spec
	require.NoError(t, Read(&s))
	assert.Equal(t, 16, s.Number, "Go's syntax")
	assert.Equal(t, List{"x", "y", "z"}, s.List, "trimmed, empty items dropped")
	assert.Equal(t, Port(9090), s.Port)
}

// TestReadRefusesByName: a value that cannot be read is an *Error naming the
// variable, its value and what is accepted.
func TestReadRefusesByName(t *testing.T) {
	for _, tt := range []struct{ name, value, accepted string }{
		{"ENVVAR_TEST_NUMBER", "many", WholeNumber},
		{"ENVVAR_TEST_DURATION", "10", "not a duration"},
		{"ENVVAR_TEST_SWITCH", "yes", "use true or false"},
		{"ENVVAR_TEST_PORT", "010", PortAccepted},
		{"ENVVAR_TEST_PORT", "0x1F90", PortAccepted},
		{"ENVVAR_TEST_PORT", "65536", PortAccepted},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			setenv(t, map[string]string{tt.name: tt.value})
			var e *Error
			require.ErrorAs(t, Read(&spec{}), &e)
			assert.Equal(t, tt.name, e.Var)
			assert.Equal(t, tt.value, e.Value)
			assert.Contains(t, e.Accepted, tt.accepted)
		})
	}
}

// TestReadRefusesEveryBadValue: every value that cannot be read is named at once, in
// the order of the fields; the others are read, the bad ones' fields keep their
// defaults, and the environment is left as it was.
func TestReadRefusesEveryBadValue(t *testing.T) {
	setenv(t, map[string]string{"ENVVAR_TEST_NUMBER": "many", "ENVVAR_TEST_SWITCH": "yes", "ENVVAR_TEST_PORT": "9090", "ENVVAR_TEST_DURATION": "10"})
	var s spec
	err := Read(&s)
	var errs Errors
	require.ErrorAs(t, err, &errs)
	var names []string
	for _, e := range errs {
		names = append(names, e.Var)
	}
	assert.Equal(t, []string{"ENVVAR_TEST_NUMBER", "ENVVAR_TEST_DURATION", "ENVVAR_TEST_SWITCH"}, names)
	var first *Error
	require.ErrorAs(t, err, &first)
	assert.Equal(t, "ENVVAR_TEST_NUMBER", first.Var, "errors.As finds the first")
	assert.Equal(t, 3, strings.Count(err.Error(), "invalid configuration: "), "one line each: %q", err)
	assert.Equal(t, Port(9090), s.Port, "the good values are read")
	assert.Equal(t, 5, s.Number, "a bad value's field keeps its default")
	assert.Equal(t, "many", os.Getenv("ENVVAR_TEST_NUMBER"), "the environment is as it was")
}

func TestErrorsCollect(t *testing.T) {
	var errs Errors
	assert.True(t, errs.Collect(nil))
	assert.NoError(t, errs.Err(), "no errors, no error")
	assert.True(t, errs.Collect(&Error{Var: "A"}))
	assert.True(t, errs.Collect(Errors{{Var: "B"}, {Var: "C"}}))
	assert.False(t, errs.Collect(os.ErrNotExist), "not a bad variable")
	require.Len(t, errs, 3)
	assert.Equal(t, "C", errs[2].Var)
}

func TestDescribe(t *testing.T) {
	vars := Describe(&spec{})
	require.Len(t, vars, 7)
	assert.Equal(t, Variable{Name: "ENVVAR_TEST_TEXT", Default: "t", Description: "a text", Text: true}, vars[0])
	assert.Equal(t, Variable{Name: "ENVVAR_TEST_SWITCH", Default: "true", Description: "a switch", Blank: "false"}, vars[3])
	assert.False(t, vars[5].Text, "a list is no text")
}
