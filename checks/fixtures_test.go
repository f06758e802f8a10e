package checks_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/checks"
)

// runTimeout bounds a check that should end on its own; no passing test comes near it.
const runTimeout = 5 * time.Second

// requireIdentity asserts what a check is called (a metric label) and what it probes.
func requireIdentity(t *testing.T, c checks.Check, name, target string) {
	t.Helper()
	require.Equal(t, name, c.Name())
	require.Equal(t, target, c.Target())
}

// assertErr asserts that err is nil when want is "", else that it reads exactly want.
func assertErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		assert.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.Equal(t, want, err.Error())
}

// assertErrContains asserts that err contains every part, or that it is nil when the parts
// are all "" (or none), as a table row without an error leaves them.
func assertErrContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if strings.Join(parts, "") == "" {
		assert.NoError(t, err)
		return
	}
	require.Error(t, err)
	for _, p := range parts {
		assert.Contains(t, err.Error(), p)
	}
}

// failThenPass runs c twice: first it fails with want, then, after change has made the node
// what c waits for, it passes. The same check passes later without being made anew.
func failThenPass(t *testing.T, c checks.Check, want string, change func()) {
	t.Helper()
	res := checks.Execute(t.Context(), c, runTimeout)
	require.Error(t, res.Err)
	assert.Equal(t, want, res.Err.Error())

	change()

	res = checks.Execute(t.Context(), c, runTimeout)
	assert.NoError(t, res.Err)
}

// onlyAction is the one request the fake API server got.
func onlyAction(t *testing.T, client *fake.Clientset) k8stesting.Action {
	t.Helper()
	require.Len(t, client.Actions(), 1)
	return client.Actions()[0]
}

// forbidden answers a request as an API server whose RBAC does not grant it.
func forbidden(gr schema.GroupResource) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gr, "", errors.New("RBAC"))
	}
}

// parsed parses in and asserts the error: one that contains wantErr, or none when wantErr
// is "". ok says that in parsed, so the caller goes on to check the value.
func parsed[T any](t *testing.T, parse func(string) (T, error), in, wantErr string) (got T, ok bool) {
	t.Helper()
	got, err := parse(in)
	if wantErr != "" {
		require.Error(t, err)
		assert.Contains(t, err.Error(), wantErr)
		return got, false
	}
	require.NoError(t, err)
	return got, true
}

// parseCase is a row of a parse test: in parses to what String gives as want, or fails
// with an error that contains wantErr.
type parseCase struct {
	in      string
	want    string // String() of the result
	wantErr string
}

// testParse runs each case as a subtest; what parses also round-trips through String.
func testParse[T fmt.Stringer](t *testing.T, parse func(string) (T, error), cases []parseCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parsed(t, parse, tt.in, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.want, got.String())
			assertRoundTrips(t, parse, got)
		})
	}
}

// assertRoundTrips asserts that v's String parses back to v.
func assertRoundTrips[T fmt.Stringer](t *testing.T, parse func(string) (T, error), v T) {
	t.Helper()
	again, err := parse(v.String())
	require.NoError(t, err, "String() must parse")
	assert.Equal(t, v, again, "String round-trips")
}

// mustParse parses a setting that a test takes as valid.
func mustParse[T any](t *testing.T, parse func(string) (T, error), s string) T {
	t.Helper()
	v, err := parse(s)
	require.NoError(t, err)
	return v
}
