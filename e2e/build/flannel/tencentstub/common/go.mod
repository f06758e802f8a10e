// A stub of the Tencent Cloud SDK's common module, just enough to build flanneld: see ../README.md.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common

go 1.26.0
