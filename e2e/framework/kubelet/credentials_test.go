package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestWriteCredentials: a pod gets the automatic token unless it opts out; one that opts out
// gets a token only from a projected serviceAccountToken source, as the agent's DaemonSet
// mounts it, with that source's expiry and audience, bound to the pod.
func TestWriteCredentials(t *testing.T) {
	projected := corev1.Volume{Name: "api-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Path: "token", ExpirationSeconds: ptr.To[int64](3600), Audience: "api"}}},
	}}}
	tests := []struct {
		name      string
		automount *bool
		volumes   []corev1.Volume
		want      *authenticationv1.TokenRequestSpec // nil: no token
	}{
		{"automatic", nil, nil, &authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds)}},
		{"opted out", ptr.To(false), nil, nil},
		{"opted out, projected token", ptr.To(false), []corev1.Volume{projected},
			&authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600), Audiences: []string{"api"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			var got *authenticationv1.TokenRequest
			client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				got = a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
				return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "t"}}, nil
			})
			k := &Kubelet{client: client, opts: Options{APIServerURL: "https://127.0.0.1:6443", CAFile: "ca.crt"}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
				Spec: corev1.PodSpec{ServiceAccountName: "sa", AutomountServiceAccountToken: tt.automount, Volumes: tt.volumes}}
			dir := t.TempDir()
			path, err := k.writeCredentials(t.Context(), pod, dir)
			require.NoError(t, err)
			if tt.want == nil {
				assert.Empty(t, path)
				assert.Nil(t, got)
				return
			}
			assert.Equal(t, filepath.Join(dir, "kubeconfig"), path)
			require.NotNil(t, got)
			want := *tt.want
			want.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "u"}
			assert.Equal(t, want, got.Spec)
			token, err := os.ReadFile(filepath.Join(dir, "token"))
			require.NoError(t, err)
			assert.Equal(t, "t", string(token))
		})
	}
}
