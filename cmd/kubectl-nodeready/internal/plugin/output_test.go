package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// TestOutputFlagsAreKubectls: -o and its template flags are kubectl's, those of
// cli-runtime's PrintFlags without -o name: the same flags, and for the same arguments the
// same output or the same error.
func TestOutputFlagsAreKubectls(t *testing.T) {
	dir := t.TempDir()
	goTemplate := filepath.Join(dir, "node.tmpl")
	require.NoError(t, os.WriteFile(goTemplate, []byte(`{{.metadata.name}} {{index .metadata.labels "node-ready/verified"}}`), 0o600))
	jsonpath := filepath.Join(dir, "node.jsonpath")
	require.NoError(t, os.WriteFile(jsonpath, []byte(`{.metadata.name}`), 0o600))
	node := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"node-ready/verified": "true"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "nodeready", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}

	kubectlCmd := func() (*cobra.Command, *genericclioptions.PrintFlags) {
		cmd := &cobra.Command{Use: "kubectl"}
		f := genericclioptions.NewPrintFlags("").WithDefaultOutput("")
		f.NamePrintFlags = nil
		f.AddFlags(cmd)
		return cmd, f
	}
	pluginCmd := func() (*cobra.Command, *outputFlags) {
		cmd := &cobra.Command{Use: "plugin"}
		f := newOutputFlags()
		f.addFlags(cmd)
		return cmd, f
	}

	want, _ := kubectlCmd()
	got, _ := pluginCmd()
	assert.Equal(t, flagTable(want.Flags()), flagTable(got.Flags()))

	for _, args := range [][]string{
		{"-o", "json"}, {"-o", "yaml"}, {"-o", "kyaml"}, {"-o", "JSON"}, {"-o", "json", "--show-managed-fields"},
		{"-o", "jsonpath={.metadata.name}"}, {"-o", "jsonpath-as-json={.metadata.labels}"}, {"-o", "jsonpath-file=" + jsonpath},
		{"-o", "jsonpath", "--template", "{.spec.taints[0].key}"},
		{"-o", "jsonpath={.metadata.missing}"}, {"-o", "jsonpath={.metadata.missing}", "--allow-missing-template-keys=false"},
		{"-o", "jsonpath={.metadata.name"},
		{"-o", "go-template={{.metadata.name}}"}, {"-o", "template={{.kind}}"}, {"-o", "go-template-file=" + goTemplate},
		{"-o", "templatefile=" + goTemplate}, {"-o", "go-template-file=" + filepath.Join(dir, "missing")},
		{"--template", "{{.metadata.name}}"}, {"-o", "json", "--template", "{{.metadata.name}}"},
		{"-o", "go-template={{.metadata.missing}}", "--allow-missing-template-keys=false"},
		{"-o", "go-template={{"}, {"-o", "go-template"}, {"-o", "jsonpath="},
		{"-o", "name"}, {"-o", "xml"}, {"-o", "json=x"}, {"-o", "Go-Template={{.kind}}"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// What a command's printer prints of the node after parsing args, or its error.
			printed := func(cmd *cobra.Command, toPrinter func() (printers.ResourcePrinter, error)) (out, err string) {
				require.NoError(t, cmd.ParseFlags(args))
				var buf bytes.Buffer
				p, perr := toPrinter()
				if perr == nil {
					perr = p.PrintObj(node.DeepCopy(), &buf)
				}
				if perr != nil {
					err = perr.Error()
				}
				return buf.String(), err
			}
			wantCmd, wantFlags := kubectlCmd()
			wantOut, wantErr := printed(wantCmd, wantFlags.ToPrinter)
			gotCmd, gotFlags := pluginCmd()
			gotOut, gotErr := printed(gotCmd, gotFlags.printer)

			assert.Equal(t, wantErr, gotErr)
			assert.Equal(t, wantOut, gotOut)
		})
	}
}
