// Package errors stubs the Tencent Cloud SDK's error type for flannel's tencent-vpc backend:
// see ../../README.md.
package errors

// TencentCloudSDKError is an error of the Tencent Cloud API. The stub never returns one.
type TencentCloudSDKError struct {
	Code, Message, RequestId string
}

func (e *TencentCloudSDKError) Error() string {
	return "[TencentCloudSDKError] Code=" + e.Code + ", Message=" + e.Message + ", RequestId=" + e.RequestId
}
