// reference-provisioner: the baseline of bench/provision-bench. A hostPath
// provisioner on sig-storage-lib-external-provisioner (the library
// nodevol-provisioner mirrors), written after the library's own example
// (examples/hostpath-provisioner) with what the bench needs besides:
// a kubeconfig (the example only runs in cluster), leader election and the
// client's QPS as flags, and the library's defaults for everything else
// (4 workers, rate limiters, resync 15 min, PV save retries).
//
// Provision makes an empty directory <dir>/<PV name> and returns a hostPath
// PV; Delete removes the directory. Built by ./build (pinned version, binary
// cached under ~/.cache/nodevol/); never run by ctest.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"
)

const identityAnnotation = "hostPathProvisionerIdentity"

type hostPath struct {
	dir      string
	identity string
}

func (p *hostPath) Provision(_ context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	path := filepath.Join(p.dir, o.PVName)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.PVName,
			Annotations: map[string]string{identityAnnotation: p.identity},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *o.StorageClass.ReclaimPolicy,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: o.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}},
		},
	}, controller.ProvisioningFinished, nil
}

func (p *hostPath) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	id, ok := pv.Annotations[identityAnnotation]
	if !ok {
		return errors.New("identity annotation not found on PV")
	}
	if id != p.identity {
		return &controller.IgnoredError{Reason: "identity annotation on PV does not match ours"}
	}
	return os.RemoveAll(filepath.Join(p.dir, pv.Name))
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (required)")
	name := flag.String("provisioner", "example.com/hostpath", "provisioner name")
	dir := flag.String("dir", "/tmp/hostpath-provisioner", "directory of the volumes")
	qps := flag.Float64("kube-api-qps", 5, "client QPS (client-go's default 5)")
	burst := flag.Int("kube-api-burst", 10, "client burst (client-go's default 10)")
	leaderElect := flag.Bool("leader-elect", false, "leader election (library default true)")
	klog.InitFlags(nil)
	flag.Parse()
	syscall.Umask(0)
	logger := klog.Background()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	config.QPS = float32(*qps)
	config.Burst = *burst
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	host, _ := os.Hostname()
	pc := controller.NewProvisionController(logger, client, *name, &hostPath{dir: *dir, identity: host},
		controller.LeaderElection(*leaderElect))
	pc.Run(context.Background())
}
