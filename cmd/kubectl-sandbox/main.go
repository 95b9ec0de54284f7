package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/cmd/localcluster/standin"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// Exit codes a CI system can use.
const (
	exitOK       = 0
	exitFindings = 1 // validation errors, policy denials, claims that cannot be rendered
	exitUsage    = 2 // bad flags or unreadable input
)

var version = "dev"

const usage = `kubectl-sandbox renders, validates and policy-checks agent-sandbox manifests
offline, with the controller's own code, runs a local cluster to try them on,
and runs commands and copies files in sandboxes. As a kubectl plugin:
kubectl sandbox ...

Commands:
  render   -f PATH...  print the Pods, Services, PVCs, NetworkPolicies and member
                       Sandboxes the controller would apply for the manifests
  validate -f PATH...  check manifests against the CRD schemas and their
                       x-kubernetes-validations, as the API server would
  policy check -f PATH...
                       evaluate the policies on the manifests and on what they render
  policy export        print the configured policies as ValidatingAdmissionPolicy YAML
  diff     -f PATH...  server-side dry-run apply against the cluster; show how each
                       object and the children it renders would change
  exec CLAIM|SANDBOX -- COMMAND [ARG...]
                       run a command in a sandbox; print its output, exit with its code
  cp LOCAL SANDBOX:NAME, cp SANDBOX:PATH LOCAL
                       copy a file into or out of a sandbox
  up                   start a local cluster (no Docker needed) with the CRDs, the
                       controller, its webhooks and optional samples
  down                 stop what up started
  kubelet              the local cluster's stand-in kubelet (up starts it): runs a
                       sandbox-runtime per sandbox Pod for kubectl exec/port-forward/logs
  version              print the version

Common flags:
  -f, --filename PATH  file, directory or - (stdin); repeatable
  -R, --recursive      descend into directories
  -o, --output FORMAT  render: yaml (default), json, name; validate/policy check: text (default), json
  -n, --namespace NS   namespace for manifests that set none (default "default")

Exit codes: 0 ok, 1 findings (invalid, denied, not renderable, differences),
2 usage or input error; exec exits with the command's exit code.
Run "kubectl-sandbox COMMAND -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// options are the flags the commands share.
type options struct {
	files          stringList
	recursive      bool
	output         string
	namespace      string
	bundles        stringList
	policies       stringList
	defaultRuntime string
	controllerNS   string
	kubeconfig     string
	context        string
	fromCluster    bool
	// lookup finds a pool or template missing from the manifests (in the
	// cluster, with --from-cluster or for diff); nil looks nowhere.
	lookup func(kind, namespace, name string, into any) bool
	// runtimeClasses lists the cluster's RuntimeClasses (with
	// --from-cluster or for diff); nil: no cluster.
	runtimeClasses func() ([]string, error)
	// defaults, once resolved (see runtimeDefaults).
	defaults *render.Defaults
	stderr   io.Writer
}

func (o *options) bind(fs *flag.FlagSet, withPolicy bool) {
	fs.Var(&o.files, "f", "file, directory or - (stdin); repeatable")
	fs.Var(&o.files, "filename", "same as -f")
	fs.BoolVar(&o.recursive, "R", false, "descend into directories")
	fs.BoolVar(&o.recursive, "recursive", false, "same as -R")
	fs.StringVar(&o.output, "o", "", "output format")
	fs.StringVar(&o.output, "output", "", "same as -o")
	fs.StringVar(&o.namespace, "n", "default", "namespace for manifests that set none")
	fs.StringVar(&o.namespace, "namespace", "default", "same as -n")
	fs.StringVar(&o.defaultRuntime, "default-runtime-class", runtimeclass.Auto,
		"the controller's --default-runtime-class, the class of Pods whose template names none: auto (the first isolating class among the manifests' RuntimeClasses, else the cluster's, else gvisor), none, or a name")
	fs.StringVar(&o.controllerNS, "controller-namespace", "agent-sandbox-system", "the controller's namespace (template NetworkPolicies)")
	if withPolicy {
		fs.Var(&o.bundles, "bundle", "built-in policy bundle[=mode] ("+strings.Join(policy.Bundles(), ", ")+"; mode enforce, warn, audit or off, enforce if not given); repeatable; bundles not named are off; default "+policy.DefaultModes().String()+" unless --policy is given. A Namespace among the manifests (or, for diff, in the cluster) labelled "+policy.ModeLabelPrefix+"<bundle>=<mode> overrides a mode for its objects")
		fs.Var(&o.policies, "policy", "policy file or directory (ValidatingAdmissionPolicy YAML); repeatable")
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		_, _ = fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "up":
		return runUp(rest, stdout, stderr)
	case "down":
		return runDown(rest, stdout, stderr)
	case "exec":
		return runExec(rest, stdout, stderr)
	case "cp":
		return runCp(rest, stdin, stdout, stderr)
	case "kubelet":
		return standin.Main(rest, stderr)
	}
	if cmd == "policy" {
		if len(rest) == 0 {
			_, _ = fmt.Fprintln(stderr, "kubectl-sandbox policy: want a subcommand: check or export")
			return exitUsage
		}
		cmd, rest = "policy "+rest[0], rest[1:]
	}
	fs := flag.NewFlagSet("kubectl-sandbox "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{stderr: stderr}
	switch cmd {
	case "render", "validate":
		o.bind(fs, false)
		if cmd == "render" {
			fs.BoolVar(&o.fromCluster, "from-cluster", false, "resolve pools and templates missing from the manifests in the cluster")
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (with --from-cluster)")
			fs.StringVar(&o.context, "context", "", "kubeconfig context (with --from-cluster)")
		}
	case "policy check":
		o.bind(fs, true)
		fs.BoolVar(&o.fromCluster, "from-cluster", false, "resolve pools and templates missing from the manifests in the cluster")
		fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (with --from-cluster)")
		fs.StringVar(&o.context, "context", "", "kubeconfig context (with --from-cluster)")
	case "policy export":
		o.bind(fs, true)
	case "diff":
		o.bind(fs, true)
		fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to diff against")
		fs.StringVar(&o.context, "context", "", "kubeconfig context")
	case "version":
		_, _ = fmt.Fprintln(stdout, "kubectl-sandbox", version)
		return exitOK
	default:
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	switch {
	case cmd == "render" && o.output != "" && o.output != "yaml" && o.output != "json" && o.output != "name":
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: -o %s: want yaml, json or name\n", cmd, o.output)
		return exitUsage
	case (cmd == "validate" || cmd == "policy check") && o.output != "" && o.output != "text" && o.output != "json":
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: -o %s: want text or json\n", cmd, o.output)
		return exitUsage
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: unexpected arguments %v (give manifests with -f)\n", cmd, fs.Args())
		return exitUsage
	}
	if err := runtimeclass.CheckSetting(o.defaultRuntime); err != nil {
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: %v\n", cmd, err)
		return exitUsage
	}
	var code int
	var err error
	if o.fromCluster {
		// render and policy check: pools and templates the manifests lack.
		var c client.Client
		if c, err = clusterClient(&o); err == nil {
			o.lookup, o.runtimeClasses = clusterLookup(c), clusterRuntimeClasses(c)
		}
	}
	switch {
	case err != nil:
	case cmd == "render":
		code, err = runRender(&o, stdin, stdout, stderr)
	case cmd == "diff":
		code, err = runDiff(&o, stdin, stdout)
	case cmd == "validate":
		code, err = runValidate(&o, stdin, stdout)
	case cmd == "policy check":
		code, err = runPolicyCheck(&o, stdin, stdout)
	case cmd == "policy export":
		code, err = runPolicyExport(&o, stdout)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: %v\n", cmd, err)
		var in *inputError
		if errors.As(err, &in) {
			return exitUsage
		}
		return exitFindings
	}
	return code
}

// placeholderUID stands in for the UID a manifest does not have yet.
const placeholderUID = types.UID("00000000-0000-0000-0000-000000000000")

// rendering is what one input document renders to.
type rendering struct {
	doc     document
	objects []any // apply configurations, or the input itself when passed through
	gvks    []schema.GroupVersionKind
	problem string // why it could not be rendered
	// missing is set when the problem is only that a pool or template it
	// refers to is not among the manifests.
	missing bool
	// checks are what policy check also judges: the Pod, Service and PVCs
	// of the Sandbox a template, pool or claim makes (render prints the
	// Sandbox, not these).
	checks    []any
	checkGVKs []schema.GroupVersionKind
}

// renderAll renders every document with the controller's render functions.
// Claims and pools find their pool and template among the documents.
func renderAll(o *options, docs []document) []rendering {
	docs = hubVersions(docs)
	templates := map[string]*extv1beta1.SandboxTemplate{}
	pools := map[string]*extv1beta1.SandboxWarmPool{}
	ns := func(u *unstructured.Unstructured) string {
		if u.GetNamespace() != "" {
			return u.GetNamespace()
		}
		return o.namespace
	}
	for _, d := range docs {
		switch d.Obj.GetKind() {
		case "SandboxTemplate":
			t := &extv1beta1.SandboxTemplate{}
			if decode(d.Obj, t) == nil {
				t.Namespace = ns(d.Obj)
				templates[t.Namespace+"/"+t.Name] = t
			}
		case "SandboxWarmPool":
			p := &extv1beta1.SandboxWarmPool{}
			if decode(d.Obj, p) == nil {
				p.Namespace = ns(d.Obj)
				pools[p.Namespace+"/"+p.Name] = p
			}
		}
	}
	defaults := func(sb *sandboxv1beta1.Sandbox) render.Defaults { return o.defaultsFor(sb, docs) }
	var out []rendering
	for _, d := range docs {
		r := rendering{doc: d}
		add := func(gvk schema.GroupVersionKind, obj any) {
			r.gvks = append(r.gvks, gvk)
			r.objects = append(r.objects, obj)
		}
		switch d.Obj.GetAPIVersion() + "/" + d.Obj.GetKind() {
		case "agents.x-k8s.io/v1beta1/Sandbox":
			sb := &sandboxv1beta1.Sandbox{}
			if err := decode(d.Obj, sb); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&sb.ObjectMeta, ns(d.Obj))
			desired, err := render.Sandbox(render.SandboxInputs{Sandbox: sb, Defaults: defaults(sb)})
			if err != nil {
				r.problem = err.Error()
				break
			}
			eachRendered(desired, add)
		case "extensions.agents.x-k8s.io/v1beta1/SandboxTemplate":
			t := &extv1beta1.SandboxTemplate{}
			if err := decode(d.Obj, t); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&t.ObjectMeta, ns(d.Obj))
			desired, err := render.Template(render.TemplateInputs{Template: t, ControllerNamespace: o.controllerNS})
			if err != nil {
				r.problem = err.Error()
				break
			}
			if desired.NetworkPolicy != nil {
				add(gvkNetworkPolicy, desired.NetworkPolicy)
			}
			if err := r.check(templateMember(t, t.Name), defaults); err != nil {
				r.problem = err.Error()
			}
		case "extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool":
			p := &extv1beta1.SandboxWarmPool{}
			if err := decode(d.Obj, p); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&p.ObjectMeta, ns(d.Obj))
			t := templates[p.Namespace+"/"+p.Spec.TemplateRef.Name]
			if t == nil {
				t = lookupTemplate(o, p.Namespace, p.Spec.TemplateRef.Name)
			}
			if t == nil {
				r.problem = fmt.Sprintf("SandboxTemplate %s is not among the manifests%s; its members cannot be rendered", p.Spec.TemplateRef.Name, clusterNote(o))
				r.missing = true
				break
			}
			plan, err := render.PlanWarmPool(render.WarmPoolPlanInputs{WarmPoolInputs: render.WarmPoolInputs{Pool: p, Template: t}})
			if err != nil {
				r.problem = err.Error()
				break
			}
			for _, m := range plan.Create {
				add(gvkSandbox, m)
			}
			// Members render alike: one stands for all, planned or not.
			if err := r.check(templateMember(t, render.MemberName(p, 0)), defaults); err != nil {
				r.problem = err.Error()
			}
		case "extensions.agents.x-k8s.io/v1beta1/SandboxClaim":
			c := &extv1beta1.SandboxClaim{}
			if err := decode(d.Obj, c); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&c.ObjectMeta, ns(d.Obj))
			p := pools[c.Namespace+"/"+c.Spec.WarmPoolRef.Name]
			if p == nil && o.lookup != nil {
				found := &extv1beta1.SandboxWarmPool{}
				if o.lookup("SandboxWarmPool", c.Namespace, c.Spec.WarmPoolRef.Name, found) {
					p = found
				}
			}
			if p == nil {
				r.problem = fmt.Sprintf("SandboxWarmPool %s is not among the manifests%s; the claim cannot be rendered", c.Spec.WarmPoolRef.Name, clusterNote(o))
				r.missing = true
				break
			}
			t := templates[p.Namespace+"/"+p.Spec.TemplateRef.Name]
			if t == nil {
				t = lookupTemplate(o, p.Namespace, p.Spec.TemplateRef.Name)
			}
			if t == nil {
				r.problem = fmt.Sprintf("SandboxTemplate %s (of pool %s) is not among the manifests%s; the claim cannot be rendered", p.Spec.TemplateRef.Name, p.Name, clusterNote(o))
				r.missing = true
				break
			}
			// What a cold start creates; a warm claim takes a pool member
			// instead (rendered with the pool).
			sb, err := render.ClaimSandbox(render.ClaimInputs{Claim: c, Template: t})
			if err != nil {
				r.problem = err.Error()
				break
			}
			add(gvkSandbox, sb)
			cold := &sandboxv1beta1.Sandbox{}
			if err := convertTo(sb, cold); err != nil {
				r.problem = err.Error()
				break
			}
			if err := r.check(cold, defaults); err != nil {
				r.problem = err.Error()
			}
		default:
			// Not ours: passed through untouched.
			r.objects = append(r.objects, d.Obj)
			r.gvks = append(r.gvks, d.Obj.GroupVersionKind())
		}
		out = append(out, r)
	}
	return out
}

func lookupTemplate(o *options, namespace, name string) *extv1beta1.SandboxTemplate {
	if o.lookup == nil {
		return nil
	}
	t := &extv1beta1.SandboxTemplate{}
	if !o.lookup("SandboxTemplate", namespace, name, t) {
		return nil
	}
	return t
}

func clusterNote(o *options) string {
	if o.lookup != nil {
		return " nor in the cluster"
	}
	return " (add it, or use --from-cluster)"
}

var (
	gvkSandbox       = sandboxv1beta1.GroupVersion.WithKind("Sandbox")
	gvkPod           = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvkService       = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	gvkPVC           = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}
	gvkNetworkPolicy = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
)

// hubVersions returns the documents with deprecated v1alpha1 objects
// converted to v1beta1, as the API server stores them, so everything below
// renders one version.
func hubVersions(docs []document) []document {
	out := make([]document, 0, len(docs))
	for _, d := range docs {
		var hub any
		switch d.Obj.GetAPIVersion() + "/" + d.Obj.GetKind() {
		case "agents.x-k8s.io/v1alpha1/Sandbox":
			in := &sandboxv1alpha1.Sandbox{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		case "extensions.agents.x-k8s.io/v1alpha1/SandboxTemplate":
			in := &extv1alpha1.SandboxTemplate{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		case "extensions.agents.x-k8s.io/v1alpha1/SandboxClaim":
			in := &extv1alpha1.SandboxClaim{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		case "extensions.agents.x-k8s.io/v1alpha1/SandboxWarmPool":
			in := &extv1alpha1.SandboxWarmPool{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		}
		if hub != nil {
			if u, err := toUnstructured(hub); err == nil {
				d.Obj = u
			}
		}
		out = append(out, d)
	}
	return out
}

// decode turns a document into a typed object, refusing unknown fields.
func decode(u *unstructured.Unstructured, into any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("decoding %s: %w", u.GetKind(), err)
	}
	return nil
}

// fill sets what the API server would: namespace, and a UID placeholder
// (rendered owner references need one).
func fill(m *metav1.ObjectMeta, ns string) {
	m.Namespace = ns
	if m.UID == "" {
		m.UID = placeholderUID
	}
	if m.Generation == 0 {
		m.Generation = 1
	}
}

func runRender(o *options, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	docs, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return 0, err
	}
	code := exitOK
	var items []any
	for _, r := range renderAll(o, docs) {
		if r.problem != "" {
			_, _ = fmt.Fprintf(stderr, "%s: %s %s: %s\n", r.doc.where(), r.doc.Obj.GetKind(), r.doc.Obj.GetName(), r.problem)
			code = exitFindings
			continue
		}
		items = append(items, r.objects...)
	}
	switch o.output {
	case "", "yaml":
		for i, it := range items {
			b, err := yaml.Marshal(it)
			if err != nil {
				return 0, err
			}
			if i > 0 {
				_, _ = fmt.Fprintln(stdout, "---")
			}
			_, _ = stdout.Write(b)
		}
	case "json":
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		if items == nil {
			list["items"] = []any{}
		}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return 0, err
		}
		_, _ = fmt.Fprintln(stdout, string(b))
	case "name":
		for _, it := range items {
			u, err := toUnstructured(it)
			if err != nil {
				return 0, err
			}
			_, _ = fmt.Fprintf(stdout, "%s/%s\n", strings.ToLower(u.GetKind()), u.GetName())
		}
	default:
		return 0, &inputError{fmt.Sprintf("-o %s: want yaml, json or name", o.output)}
	}
	return code, nil
}

func toUnstructured(v any) (*unstructured.Unstructured, error) {
	if u, ok := v.(*unstructured.Unstructured); ok {
		return u, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, u.UnmarshalJSON(b)
}

// finding is one validation error or policy decision, for text or JSON.
type finding struct {
	File     string           `json:"file"`
	Document int              `json:"document"`
	Line     int              `json:"line"`
	Object   string           `json:"object"`
	Field    string           `json:"field,omitempty"`
	Message  string           `json:"message"`
	Decision *policy.Decision `json:"decision,omitempty"`
}

func writeFindings(w io.Writer, format string, findings []finding, summary string) error {
	// A stable order whatever order the validators report in.
	sort.SliceStable(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Document != b.Document {
			return a.Document < b.Document
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
	switch format {
	case "", "text":
		for _, f := range findings {
			loc := fmt.Sprintf("%s: document %d (line %d): %s", f.File, f.Document, f.Line, f.Object)
			if f.Field != "" {
				loc += ": " + f.Field
			}
			_, _ = fmt.Fprintf(w, "%s: %s\n", loc, f.Message)
		}
		_, _ = fmt.Fprintln(w, summary)
	case "json":
		if findings == nil {
			findings = []finding{}
		}
		b, err := json.MarshalIndent(findings, "", "  ")
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintln(w, string(b))
	default:
		return &inputError{fmt.Sprintf("-o %s: want text or json", format)}
	}
	return nil
}

func objectName(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetName()
}

func runValidate(o *options, stdin io.Reader, stdout io.Writer) (int, error) {
	docs, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return 0, err
	}
	schemas, err := policy.BuiltinSchemas()
	if err != nil {
		return 0, err
	}
	var findings []finding
	skipped := 0
	for _, d := range docs {
		gvk := d.Obj.GroupVersionKind()
		if gvk.Group != sandboxv1beta1.GroupVersion.Group && gvk.Group != extv1beta1.GroupVersion.Group {
			skipped++
			continue
		}
		for _, e := range schemas.Validate(context.Background(), d.Obj, nil) {
			findings = append(findings, finding{File: d.File, Document: d.Index, Line: d.Line, Object: objectName(d.Obj),
				Field: e.Field, Message: strings.TrimPrefix(e.ErrorBody(), e.Field+": ")})
		}
	}
	summary := fmt.Sprintf("%d documents, %d errors", len(docs), len(findings))
	if skipped > 0 {
		summary += fmt.Sprintf(" (%d not agent-sandbox kinds, not validated)", skipped)
	}
	if err := writeFindings(stdout, o.output, findings, summary); err != nil {
		return 0, err
	}
	if len(findings) > 0 {
		return exitFindings, nil
	}
	return exitOK, nil
}
