// Command upstream-ccm is the upstream cloud-controller-manager (k8s.io/cloud-provider's app
// package, the code every external CCM is built on) with a provider named "fake" that answers
// as hypercloud's fake provider does (pkg/cloudprovider/src/fake.rs): the same YAML file of
// instances, the same provider IDs (fake:///<id>), zones, addresses and load-balancer IPs.
// hack/bench/compare-upstream.sh runs it beside hypercloud's cloud-controller-manager on one
// apiserver, so the two differ only in the controller manager.
//
// Lookups are map look-ups (constant time), as hypercloud's fake is meant to be: the bench
// measures controller managers, not the fake clouds.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

const providerName = "fake"

type address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

type instance struct {
	Name         string            `json:"name"`
	ID           string            `json:"id,omitempty"`
	InstanceType string            `json:"instanceType,omitempty"`
	Zone         string            `json:"zone,omitempty"`
	Region       string            `json:"region,omitempty"`
	Addresses    []address         `json:"addresses,omitempty"`
	Shutdown     bool              `json:"shutdown,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// config is the subset of hypercloud's fake YAML the node and service controllers use; any
// other key is refused, as hypercloud's fake refuses unknown keys.
type config struct {
	Region       string     `json:"region"`
	Zone         string     `json:"zone"`
	HasClusterID *bool      `json:"hasClusterID,omitempty"`
	Instances    []instance `json:"instances"`
}

type fakeCloud struct {
	cfg        config
	byName     map[string]*instance
	byProvider map[string]*instance

	mu     sync.Mutex
	lbs    map[string]string // load-balancer name -> IP
	nextIP int
}

func newFake(r io.Reader) (cloudprovider.Interface, error) {
	if r == nil {
		return nil, fmt.Errorf("the fake provider needs --cloud-config")
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var cfg config
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("fake cloud config: %w", err)
	}
	f := &fakeCloud{
		cfg:        cfg,
		byName:     make(map[string]*instance, len(cfg.Instances)),
		byProvider: make(map[string]*instance, len(cfg.Instances)),
		lbs:        map[string]string{},
		nextIP:     1,
	}
	for i := range cfg.Instances {
		in := &cfg.Instances[i]
		f.byName[in.Name] = in
		f.byProvider[providerID(in)] = in
	}
	return f, nil
}

func providerID(in *instance) string {
	id := in.ID
	if id == "" {
		id = in.Name
	}
	return providerName + ":///" + id
}

func (f *fakeCloud) find(node *v1.Node) (*instance, error) {
	var in *instance
	if node.Spec.ProviderID != "" {
		in = f.byProvider[node.Spec.ProviderID]
	} else {
		in = f.byName[node.Name]
	}
	if in == nil {
		return nil, cloudprovider.InstanceNotFound
	}
	return in, nil
}

func (f *fakeCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (f *fakeCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return f, true }
func (f *fakeCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (f *fakeCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return f, true }
func (f *fakeCloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (f *fakeCloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (f *fakeCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (f *fakeCloud) ProviderName() string                                              { return providerName }
func (f *fakeCloud) HasClusterID() bool {
	return f.cfg.HasClusterID == nil || *f.cfg.HasClusterID
}

func (f *fakeCloud) InstanceExists(_ context.Context, node *v1.Node) (bool, error) {
	_, err := f.find(node)
	return err == nil, nil
}

func (f *fakeCloud) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	in, err := f.find(node)
	if err != nil {
		return false, err
	}
	return in.Shutdown, nil
}

func (f *fakeCloud) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	in, err := f.find(node)
	if err != nil {
		return nil, err
	}
	zone, region := in.Zone, in.Region
	if zone == "" {
		zone = f.cfg.Zone
	}
	if region == "" {
		region = f.cfg.Region
	}
	addrs := make([]v1.NodeAddress, 0, len(in.Addresses))
	for _, a := range in.Addresses {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address})
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       providerID(in),
		InstanceType:     in.InstanceType,
		NodeAddresses:    addrs,
		Zone:             zone,
		Region:           region,
		AdditionalLabels: in.Labels,
	}, nil
}

func (f *fakeCloud) status(name string) *v1.LoadBalancerStatus {
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: f.lbs[name]}}}
}

func (f *fakeCloud) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := cloudprovider.DefaultLoadBalancerName(svc)
	if _, ok := f.lbs[name]; !ok {
		return nil, false, nil
	}
	return f.status(name), true, nil
}

func (f *fakeCloud) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

func (f *fakeCloud) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := cloudprovider.DefaultLoadBalancerName(svc)
	if _, ok := f.lbs[name]; !ok {
		// As hypercloud's fake: 192.0.2.<n>, n wrapping within 1..255.
		f.lbs[name] = fmt.Sprintf("192.0.2.%d", f.nextIP)
		f.nextIP = f.nextIP%255 + 1
	}
	return f.status(name), nil
}

func (f *fakeCloud) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := cloudprovider.DefaultLoadBalancerName(svc)
	if _, ok := f.lbs[name]; !ok {
		return fmt.Errorf("load balancer %s does not exist", name)
	}
	return nil
}

func (f *fakeCloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.lbs, cloudprovider.DefaultLoadBalancerName(svc))
	return nil
}

func cloudInitializer(c *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("cloud provider is nil (--cloud-provider=%s)", shared.Name)
	}
	return cloud
}

func main() {
	cloudprovider.RegisterCloudProvider(providerName, newFake)
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream-ccm:", err)
		os.Exit(1)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, cloudInitializer, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}
