package checks

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeready/nodeready/internal/kube"
)

// Every failing check is someone's fault, decided where its error is made:
//
//   - this node's: nothing marks the error. It holds the node and, once the retries
//     or the initial timeout run out, may bring on the failure action;
//   - the cluster's or the configuration's: the error is a Misconfiguration. Every
//     node would fail the same way (a refusal by RBAC or an admission policy, an API
//     the cluster does not serve, an object the configuration names that does not
//     exist, a program that is not in the image, an API server that answers it is
//     not ready), so the node stays held with the condition Misconfigured, the
//     misconfiguration alert fires, and the failure action never runs;
//   - nobody's to tell: the error is Unattributed. It fails on this node, but nothing
//     this node can see tells whether the fault is its own or another's (the one
//     other node it could probe does not answer, say). It holds the node, as a
//     failing check, and never brings on the failure action by itself;
//   - not applicable: the error wraps ErrSkipped, a documented skip.

// ErrMisconfigured matches, with errors.Is, a check error that is the cluster's or the
// configuration's fault.
var ErrMisconfigured = errors.New("misconfigured")

// Misconfiguration marks err as the cluster's or the configuration's fault. Its
// message is err's.
func Misconfiguration(err error) error {
	if err == nil {
		return nil
	}
	return misconfigured{err}
}

type misconfigured struct{ error }

func (m misconfigured) Unwrap() error      { return m.error }
func (misconfigured) Is(target error) bool { return target == ErrMisconfigured }

// ErrUnattributed matches, with errors.Is, a check error whose owner this node
// cannot tell (Unattributed).
var ErrUnattributed = errors.New("fault not attributable to this node")

// Unattributed marks err as a failure on this node whose owner cannot be told from
// it: it holds the node and never brings on the failure action by itself. Its
// message is err's.
func Unattributed(err error) error {
	if err == nil {
		return nil
	}
	return unattributed{err}
}

type unattributed struct{ error }

func (u unattributed) Unwrap() error      { return u.error }
func (unattributed) Is(target error) bool { return target == ErrUnattributed }

// answered reports whether err is the API server's answer (a status it sent), rather
// than a request that got none: a path from this node to the API server that works.
func answered(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// untrusted reports whether err is a TLS certificate that does not verify: the
// server's certificate or the trust the configuration gives (HTTP_CA_FILE), not this
// node's path, which carried the handshake.
func untrusted(err error) bool {
	var (
		verification *tls.CertificateVerificationError
		authority    x509.UnknownAuthorityError
		hostname     x509.HostnameError
		invalid      x509.CertificateInvalidError
	)
	return errors.As(err, &verification) || errors.As(err, &authority) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// certificateError says whose fault a certificate that does not verify is
// (untrusted). One outside its validity by this node's clock ("expired", "not yet
// valid") is judged by the API server's clock, from the Date of its latest answer
// (clock): within its validity there, it is this node's fault, whose clock is
// wrong; outside it there too, the server's or the configuration's. When no recent
// answer tells, or the certificate's bounds fall within the sample's uncertainty,
// nobody's can be told. Any other verification error (an unknown authority, a
// name the certificate does not hold) is the configuration's or the server's.
func certificateError(err error, clock *kube.Clock) error {
	var invalid x509.CertificateInvalidError
	if !errors.As(err, &invalid) || invalid.Reason != x509.Expired || invalid.Cert == nil {
		return Misconfiguration(err)
	}
	cert := invalid.Cert
	earliest, latest, ok := serverTime(clock, time.Now())
	switch {
	case !ok:
		return Unattributed(fmt.Errorf("%w (no recent answer of the API server tells whether this node's clock is wrong)", err))
	case !earliest.Before(cert.NotBefore) && !latest.After(cert.NotAfter):
		return fmt.Errorf("%w; valid by the API server's clock (%s): this node's clock is wrong", err, earliest.UTC().Format(time.RFC3339))
	case latest.Before(cert.NotBefore) || earliest.After(cert.NotAfter):
		return Misconfiguration(err)
	}
	return Unattributed(fmt.Errorf("%w (too near a bound of its validity to tell by the API server's clock whether this node's is wrong)", err))
}

// apiError marks an error of an API request by whose fault it is: an answer of
// the API server (a refusal, a missing object, an API server that says it is not
// ready) is the cluster's or the configuration's; no answer at all is this node's,
// whose path to the API server failed. A 403 says plainly that it is a permissions
// problem, which retrying will not fix.
func apiError(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return Misconfiguration(fmt.Errorf("forbidden, check the agent's RBAC and admission policies: %w", err))
	case answered(err):
		return Misconfiguration(err)
	}
	return err
}

// gateError is apiError for a gate, and names the file that grants the gate what it
// reads when the API server refuses it: the gates' RBAC is not part of the default
// install (manifests/gates/).
func gateError(err error, gate string) error {
	if !apierrors.IsForbidden(err) {
		return apiError(err)
	}
	file := "manifests/gates/" + gate + ".yaml"
	return Misconfiguration(fmt.Errorf("forbidden: the %s gate needs the RBAC of %s (kubectl apply -f %s): %w", gate, file, file, err))
}
