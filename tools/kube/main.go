// Command kube is a Kubernetes control plane in one process, for the
// control-plane test of the deploy files (e2e/controlplane_test.go): an
// embedded etcd, the real kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver,
// every admission plugin it enables by default, Pod Security among them)
// and the controllers whose work the test checks, taken from
// k8s.io/kubernetes/pkg/controller: the Job controller (the Indexed Job's
// pods and their completion indexes), the Deployment and ReplicaSet
// controllers (the sidecar's pods, which Pod Security admits or refuses as
// they are created) and the ServiceAccount controller (the namespace's
// "default" account, without which the ServiceAccount admission plugin
// refuses every pod).
//
//	kube -etcd-dir DIR -etcd-client ADDR -etcd-peer ADDR -kubeconfig FILE -- KUBE-APISERVER-FLAG...
//
// The flags after "--" are kube-apiserver's own (its --etcd-servers is set
// here); -kubeconfig is the controllers' credential. It runs until SIGTERM
// or SIGINT, then stops the controllers, the API server and etcd.
//
// Why one main rather than the kube-apiserver, kube-controller-manager and
// etcd commands: kube-controller-manager links every controller and volume
// plugin (374 packages beyond kube-apiserver's 2,000), and three binaries
// are three links; this one (109 MB) adds to kube-apiserver's packages only
// four controllers and etcd's server: a fifth less CPU to build cold
// (the figures are in docs/deploy.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as kube-apiserver's main registers them
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"
)

func main() {
	etcdDir := flag.String("etcd-dir", "", "etcd's data directory (required)")
	etcdClient := flag.String("etcd-client", "127.0.0.1:2379", "address of etcd's client listener (loopback)")
	etcdPeer := flag.String("etcd-peer", "127.0.0.1:2380", "address of etcd's peer listener (loopback; a single member has no peer, but etcd listens)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the controllers (required)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: kube -etcd-dir DIR -kubeconfig FILE [-etcd-client ADDR] [-etcd-peer ADDR] -- KUBE-APISERVER-FLAG...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *etcdDir == "" || *kubeconfig == "" {
		flag.Usage()
		os.Exit(2)
	}

	etcd, err := startEtcd(*etcdDir, *etcdClient, *etcdPeer)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube: etcd:", err)
		os.Exit(1)
	}
	defer etcd.Close()

	// kube-apiserver's own command: its flags, defaults and validation, and
	// the signal context it sets up (there may be only one in a process, so
	// the controllers share it).
	apiserver := app.NewAPIServerCommand()
	apiserver.SetArgs(append([]string{"--etcd-servers=http://" + *etcdClient}, flag.Args()...))
	ctx := apiserver.Context()

	controllersCtx, stopControllers := context.WithCancel(ctx)
	var controllers sync.WaitGroup
	controllers.Add(1)
	go func() {
		defer controllers.Done()
		if err := runControllers(controllersCtx, *kubeconfig); err != nil && controllersCtx.Err() == nil {
			// Without its controllers the control plane is not the one the
			// test checks: stop rather than serve half of it.
			klog.ErrorS(err, "controllers failed")
			os.Exit(1)
		}
	}()

	code := cli.Run(apiserver)
	stopControllers()
	controllers.Wait()
	etcd.Close()
	os.Exit(code)
}

// startEtcd starts a single-member etcd on loopback and waits until it
// serves.
func startEtcd(dir, client, peer string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "kube"
	cfg.Dir = dir
	clientURL := url.URL{Scheme: "http", Host: client}
	peerURL := url.URL{Scheme: "http", Host: peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	// A test's data, thrown away after it: fsync would only make a loaded
	// CI machine's disk the slowest part of every write.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(time.Minute):
		e.Close()
		return nil, errors.New("not ready within a minute")
	}
}

// runControllers waits until the API server is ready, then runs the
// controllers until ctx ends.
func runControllers(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "kube-controllers"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}

	// Resync as kube-controller-manager does by default (12 hours): the
	// controllers act on events, not on resyncs.
	factory := informers.NewSharedInformerFactory(client, 12*time.Hour)
	jobs, err := job.NewController(ctx, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), client)
	if err != nil {
		return fmt.Errorf("job controller: %w", err)
	}
	deployments, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client)
	if err != nil {
		return fmt.Errorf("deployment controller: %w", err)
	}
	replicaSets := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, replicaset.BurstReplicas)
	serviceAccounts, err := serviceaccount.NewServiceAccountsController(klog.FromContext(ctx),
		factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), client,
		serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return fmt.Errorf("serviceaccount controller: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	var wg sync.WaitGroup
	for _, run := range []func(context.Context, int){jobs.Run, deployments.Run, replicaSets.Run, serviceAccounts.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, 2)
		}()
	}
	klog.InfoS("controllers started", "controllers", []string{"job", "deployment", "replicaset", "serviceaccount"})
	wg.Wait()
	return ctx.Err()
}
