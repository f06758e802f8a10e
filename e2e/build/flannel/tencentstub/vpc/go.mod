// A stub of the Tencent Cloud SDK's vpc module, just enough to build flanneld: see ../README.md.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.26.0
