// Command schemas writes kubeconform's strict JSON schemas, one per kind,
// from a Kubernetes release's OpenAPI document (api/openapi-spec/
// swagger.json in the k8s.io/kubernetes module), so that manifests are
// checked against that release offline: schemas DIR < swagger.json.
//
// Each schema is the kind's definition with every definition it refers to
// (transitively) beside it; objects allow no property they do not name;
// int-or-string and quantity take a string or a number.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: schemas DIR < swagger.json")
		os.Exit(2)
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&doc); err != nil {
		fmt.Fprintln(os.Stderr, "read the OpenAPI document:", err)
		os.Exit(1)
	}
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, def := range doc.Definitions {
		switch {
		case strings.HasSuffix(name, ".IntOrString"), strings.HasSuffix(name, ".Quantity"):
			doc.Definitions[name] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
		default:
			strict(def)
		}
	}
	n := 0
	for name, def := range doc.Definitions {
		raw, _ := json.Marshal(def["x-kubernetes-group-version-kind"])
		var kinds []gvk
		if json.Unmarshal(raw, &kinds) != nil || len(kinds) == 0 {
			continue
		}
		deps := map[string]any{}
		collect(doc.Definitions, name, deps)
		for _, k := range kinds {
			schema := map[string]any{"$ref": "#/definitions/" + name, "definitions": deps}
			if err := write(os.Args[1], k, schema); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			n++
		}
	}
	fmt.Printf("%d schemas in %s\n", n, os.Args[1])
}

// strict makes an object schema refuse properties it does not name.
func strict(def map[string]any) {
	if _, ok := def["properties"]; ok {
		if _, set := def["additionalProperties"]; !set {
			def["additionalProperties"] = false
		}
	}
}

// collect adds name and every definition it refers to into deps.
func collect(defs map[string]map[string]any, name string, deps map[string]any) {
	if _, ok := deps[name]; ok {
		return
	}
	def, ok := defs[name]
	if !ok {
		return
	}
	deps[name] = def
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				collect(defs, strings.TrimPrefix(ref, "#/definitions/"), deps)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(def)
}

// write stores a kind's schema under kubeconform's name for it:
// <kind>[-<group's first label>]-<version>.json, lower case.
func write(dir string, k gvk, schema map[string]any) error {
	name := strings.ToLower(k.Kind)
	if k.Group != "" {
		name += "-" + strings.ToLower(strings.Split(k.Group, ".")[0])
	}
	name += "-" + strings.ToLower(k.Version) + ".json"
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}
