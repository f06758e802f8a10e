// Package v20170312 stubs the part of the Tencent Cloud VPC API client that flannel's tencent-vpc
// backend uses, so that flanneld builds without the SDK: see ../../README.md. Every call fails.
package v20170312

import "errors"

var errUnavailable = errors.New("tencent cloud VPC API: not available in this build (e2e/build/flannel/tencentstub)")

// Client would call the Tencent Cloud VPC API.
type Client struct{}

// NewClientWithSecretId returns an error: the SDK is not part of this build.
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return nil, errUnavailable
}

// Filter selects the route tables DescribeRouteTables returns.
type Filter struct {
	Name   *string
	Values []*string
}

// Route is a route of a route table.
type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteId              *uint64
	RouteType            *string
	Enabled              *bool
}

// RouteTable is a route table of a VPC.
type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

type DescribeRouteTablesRequest struct{ Filters []*Filter }

type DescribeRouteTablesResponse struct {
	Response *struct{ RouteTableSet []*RouteTable }
}

type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type CreateRoutesResponse struct{}

type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type DeleteRoutesResponse struct{}

func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}
func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

// DescribeRouteTables returns an error: the SDK is not part of this build.
func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errUnavailable
}

// CreateRoutes returns an error: the SDK is not part of this build.
func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, errUnavailable
}

// DeleteRoutes returns an error: the SDK is not part of this build.
func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, errUnavailable
}
