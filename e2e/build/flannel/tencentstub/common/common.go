// Package common stubs the part of the Tencent Cloud SDK's common package that flannel's
// tencent-vpc backend uses, so that flanneld builds without the SDK: see ../README.md.
package common

// StringPtr returns a pointer to s.
func StringPtr(s string) *string { return &s }

// StringPtrs returns pointers to the elements of s.
func StringPtrs(s []string) []*string {
	ps := make([]*string, len(s))
	for i := range s {
		ps[i] = &s[i]
	}
	return ps
}

// BoolPtr returns a pointer to b.
func BoolPtr(b bool) *bool { return &b }
