// Command draplugin is a small Dynamic Resource Allocation kubelet plugin for the real-node
// tests, built on k8s.io/dynamic-resource-allocation's kubeletplugin helper as real drivers
// are: it registers with the kubelet through the kubelet's plugin registration directory and,
// after -delay, publishes one pool of -devices devices for its node in ResourceSlices. It
// prepares no claims (the tests allocate none). It runs until SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the node's identity (system:node:<node>)")
	node := flag.String("node", "", "the node")
	driver := flag.String("driver", "gpu.nodeready.example", "the driver name")
	devices := flag.Int("devices", 2, "devices to publish")
	delay := flag.Duration("delay", 0, "wait this long after registering before publishing")
	kubeletRoot := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	flag.Parse()
	if err := run(*kubeconfig, *node, *driver, *kubeletRoot, *devices, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "draplugin:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, node, driver, kubeletRoot string, devices int, delay time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dataDir := filepath.Join(kubeletRoot, "plugins", driver)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return err
	}
	helper, err := kubeletplugin.Start(ctx, noClaims{},
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(node),
		kubeletplugin.DriverName(driver),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(kubeletRoot, "plugins_registry")),
		kubeletplugin.PluginDataDirectoryPath(dataDir))
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer helper.Stop()

	// Registered with the kubelet before anything is published, as a driver comes up.
	for helper.RegistrationStatus() == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	if s := helper.RegistrationStatus(); !s.PluginRegistered {
		return fmt.Errorf("the kubelet refused the registration: %s", s.Error)
	}
	fmt.Println("registered with the kubelet")
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(delay):
	}

	var slice resourceslice.Slice
	for i := range devices {
		slice.Devices = append(slice.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"productName": {StringValue: ptr.To("Example GPU")},
			},
		})
	}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{node: {Slices: []resourceslice.Slice{slice}}},
	}); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	fmt.Printf("published %d devices\n", devices)
	<-ctx.Done()
	return nil
}

// noClaims is a driver that prepares nothing: no claim is ever allocated to it here.
type noClaims struct{}

func (noClaims) PrepareResourceClaims(context.Context, []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	return nil, errors.New("draplugin prepares no claims")
}

func (noClaims) UnprepareResourceClaims(context.Context, []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	return nil, nil
}

func (noClaims) HandleError(_ context.Context, err error, msg string) {
	fmt.Fprintln(os.Stderr, "draplugin:", msg+":", err)
}
