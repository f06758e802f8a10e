package checks

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// gateForbidden says plainly which file grants a gate what it reads when the API server
// refuses it: the gates' RBAC is not part of the default install (manifests/gates/).
func gateForbidden(err error, gate string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	file := "manifests/gates/" + gate + ".yaml"
	return fmt.Errorf("forbidden: the %s gate needs the RBAC of %s (kubectl apply -f %s): %w", gate, file, file, err)
}
