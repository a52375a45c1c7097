// kedaprobe calls a KEDA external scaler the way KEDA does, through KEDA's own generated
// gRPC client (github.com/kedacore/keda/v2/pkg/scalers/externalscaler), and prints each
// answer as one JSON line: the tests of kafka-share-exporter's scaler use it as an oracle.
//
//	kedaprobe -addr HOST:PORT [-name N] [-namespace NS] -metadata '{"group":"g"}' CALL...
//	kedaprobe -addr HOST:PORT -manifest deploy/keda/scaledobject-external.yaml CALL...
//
// CALL is one of
//
//	ref             no call: the ScaledObjectRef KEDA would send (name, namespace, metadata)
//	isactive        IsActive
//	spec            GetMetricSpec
//	metrics[=NAME]  GetMetrics of NAME (default: every metric GetMetricSpec names, as KEDA asks)
//	stream[=N]      StreamIsActive, the first N answers (default 1)
//	keda            what KEDA itself calls for the trigger's type: GetMetricSpec, then for
//	                each metric GetMetrics and IsActive; and StreamIsActive's first answer
//	                for external-push
//
// With -manifest, the calls go to every trigger of type external or external-push of the
// ScaledObject, with that trigger's metadata as KEDA sends it (the trigger's metadata map
// as it is, scalerAddress included; the ScaledObject's name and namespace). -addr stands
// in for the manifest's scalerAddress.
//
// Each line: {"trigger":I,"type":T,"call":C,"ok":true,"response":{...}} or, on a gRPC
// error, {"trigger":I,"type":T,"call":C,"ok":false,"code":"NotFound","code_num":5,
// "message":"..."}. The exit code is 0 when every call was made (whatever it answered), 2
// on bad usage or an unreadable manifest.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"
)

// The parts of a ScaledObject KEDA reads to build a ScaledObjectRef.
type scaledObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Triggers []struct {
			Type     string            `yaml:"type"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

type target struct {
	index int
	kind  string
	ref   *pb.ScaledObjectRef
}

func main() {
	addr := flag.String("addr", "", "the scaler's HOST:PORT")
	name := flag.String("name", "probe", "the ScaledObject's name (without -manifest)")
	namespace := flag.String("namespace", "default", "the ScaledObject's namespace (without -manifest)")
	metadata := flag.String("metadata", "", "the trigger metadata as a JSON object of strings")
	manifest := flag.String("manifest", "", "a ScaledObject manifest: its external and external-push triggers")
	timeout := flag.Duration("timeout", 30*time.Second, "the longest one call waits")
	flag.Parse()
	if *addr == "" || flag.NArg() == 0 || (*metadata == "") == (*manifest == "") {
		fmt.Fprintln(os.Stderr, "usage: kedaprobe -addr HOST:PORT (-metadata JSON | -manifest FILE) CALL...")
		os.Exit(2)
	}
	targets, err := readTargets(*name, *namespace, *metadata, *manifest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kedaprobe:", err)
		os.Exit(2)
	}
	// As KEDA connects (pkg/scalers/external_scaler.go): plaintext, round robin.
	conn, err := grpc.NewClient(*addr,
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kedaprobe:", err)
		os.Exit(2)
	}
	defer conn.Close()
	client := pb.NewExternalScalerClient(conn)
	out := json.NewEncoder(os.Stdout)
	for _, t := range targets {
		for _, call := range flag.Args() {
			run(client, t, call, *timeout, out)
		}
	}
}

func readTargets(name, namespace, metadata, manifest string) ([]target, error) {
	if metadata != "" {
		m := map[string]string{}
		if err := json.Unmarshal([]byte(metadata), &m); err != nil {
			return nil, fmt.Errorf("-metadata: %w", err)
		}
		return []target{{0, "external", &pb.ScaledObjectRef{Name: name, Namespace: namespace, ScalerMetadata: m}}}, nil
	}
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	var so scaledObject
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&so); err != nil {
		return nil, fmt.Errorf("%s: %w", manifest, err)
	}
	if so.Kind != "ScaledObject" {
		return nil, fmt.Errorf("%s: kind %q, not ScaledObject", manifest, so.Kind)
	}
	ns := so.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	var out []target
	for i, tr := range so.Spec.Triggers {
		if tr.Type != "external" && tr.Type != "external-push" {
			continue
		}
		// KEDA sends the trigger's metadata map as it is (scalerAddress too).
		m := map[string]string{}
		for k, v := range tr.Metadata {
			m[k] = v
		}
		out = append(out, target{i, tr.Type, &pb.ScaledObjectRef{Name: so.Metadata.Name, Namespace: ns, ScalerMetadata: m}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no trigger of type external or external-push", manifest)
	}
	return out, nil
}

// line prints one answer or one error.
func line(out *json.Encoder, t target, call string, resp proto.Message, err error) {
	rec := map[string]any{"trigger": t.index, "type": t.kind, "call": call}
	if err != nil {
		st, _ := status.FromError(err)
		rec["ok"] = false
		rec["code"] = st.Code().String()
		rec["code_num"] = int(st.Code())
		rec["message"] = st.Message()
	} else {
		rec["ok"] = true
		// protojson: the field names and int64-as-string of the proto's JSON mapping,
		// with every field, zero values too.
		b, mErr := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(resp)
		if mErr != nil {
			rec["ok"] = false
			rec["message"] = mErr.Error()
		} else {
			rec["response"] = json.RawMessage(b)
		}
	}
	_ = out.Encode(rec)
}

func run(client pb.ExternalScalerClient, t target, call string, timeout time.Duration, out *json.Encoder) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	verb, arg, _ := strings.Cut(call, "=")
	switch verb {
	case "ref":
		line(out, t, "ScaledObjectRef", t.ref, nil)
	case "isactive":
		r, err := client.IsActive(ctx, t.ref)
		line(out, t, "IsActive", r, err)
	case "spec":
		r, err := client.GetMetricSpec(ctx, t.ref)
		line(out, t, "GetMetricSpec", r, err)
	case "metrics":
		names := []string{arg}
		if arg == "" {
			spec, err := client.GetMetricSpec(ctx, t.ref)
			if err != nil {
				line(out, t, "GetMetricSpec", spec, err)
				return
			}
			names = names[:0]
			for _, s := range spec.MetricSpecs {
				names = append(names, s.MetricName)
			}
		}
		for _, n := range names {
			r, err := client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: t.ref, MetricName: n})
			line(out, t, "GetMetrics", r, err)
		}
	case "stream":
		n := 1
		if arg != "" {
			v, err := strconv.Atoi(arg)
			if err != nil || v < 1 {
				fmt.Fprintln(os.Stderr, "kedaprobe: stream=N needs N >= 1")
				os.Exit(2)
			}
			n = v
		}
		stream(ctx, client, t, n, out)
	case "keda":
		// GetMetricSpecForScaling, then GetMetricsAndActivity per metric (GetMetrics with
		// the name the spec gave, then IsActive), as KEDA's external scaler does.
		spec, err := client.GetMetricSpec(ctx, t.ref)
		line(out, t, "GetMetricSpec", spec, err)
		if err != nil {
			return
		}
		for _, s := range spec.MetricSpecs {
			r, err := client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: t.ref, MetricName: s.MetricName})
			line(out, t, "GetMetrics", r, err)
			a, err := client.IsActive(ctx, t.ref)
			line(out, t, "IsActive", a, err)
		}
		if t.kind == "external-push" {
			stream(ctx, client, t, 1, out)
		}
	default:
		fmt.Fprintf(os.Stderr, "kedaprobe: unknown call %q\n", call)
		os.Exit(2)
	}
}

// stream prints StreamIsActive's first n answers (or the error that ended it).
func stream(ctx context.Context, client pb.ExternalScalerClient, t target, n int, out *json.Encoder) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := client.StreamIsActive(ctx, t.ref)
	if err != nil {
		line(out, t, "StreamIsActive", nil, err)
		return
	}
	for i := 0; i < n; i++ {
		r, err := s.Recv()
		if err == io.EOF {
			// Ended with status OK: not an answer, and not a gRPC error either.
			_ = out.Encode(map[string]any{"trigger": t.index, "type": t.kind, "call": "StreamIsActive",
				"ok": false, "code": "EOF", "code_num": -1, "message": "the stream ended"})
			return
		}
		line(out, t, "StreamIsActive", r, err)
		if err != nil {
			return
		}
	}
}
