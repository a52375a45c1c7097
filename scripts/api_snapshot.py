"""Renders rustdoc's JSON for the crate as one line per public item (see scripts/api-snapshot).

Only the fields that have been stable across rustdoc JSON format versions are read: `root`,
`index` (`name`, `visibility`, `inner`), `use` items and `impls`. A type this renderer does not
know is written as `_`, so a new rustdoc shape degrades the detail, not the run.
"""

import json
import sys


def main(path):
    doc = json.load(open(path))
    index = doc["index"]
    lines = set()

    def item(i):
        return index.get(str(i))

    def kind(it):
        return next(iter(it["inner"]))

    def ty(t):
        if t is None:
            return "()"
        if not isinstance(t, dict):
            return "_"
        k, v = next(iter(t.items()))
        if k == "primitive":
            return v
        if k == "generic":
            return v
        if k == "tuple":
            return "(" + ", ".join(ty(x) for x in v) + ")"
        if k == "slice":
            return "[" + ty(v) + "]"
        if k == "array":
            return "[" + ty(v["type"]) + "; " + str(v.get("len", "_")) + "]"
        if k == "borrowed_ref":
            return "&" + ("mut " if v.get("is_mutable") else "") + ty(v["type"])
        if k == "raw_pointer":
            return "*" + ("mut " if v.get("is_mutable") else "const ") + ty(v["type"])
        if k == "resolved_path":
            return v["path"] + args(v.get("args"))
        if k == "impl_trait":
            return "impl " + " + ".join(bound(b) for b in v)
        if k == "dyn_trait":
            return "dyn " + " + ".join(tr["trait"]["path"] + args(tr["trait"].get("args")) for tr in v["traits"])
        if k == "qualified_path":
            return "<" + ty(v["self_type"]) + ">::" + v["name"]
        if k == "function_pointer":
            sig = v.get("sig", {})
            return "fn(" + ", ".join(ty(x[1]) for x in sig.get("inputs", [])) + ") -> " + ty(sig.get("output"))
        return "_"

    def args(a):
        if not a:
            return ""
        if "angle_bracketed" in a:
            ab = a["angle_bracketed"]
            parts = []
            for x in ab.get("args", []):
                if "type" in x:
                    parts.append(ty(x["type"]))
                elif "lifetime" in x:
                    parts.append(x["lifetime"])
                else:
                    parts.append("_")
            for c in ab.get("constraints", []):
                b = c.get("binding", {})
                if "equality" in b and isinstance(b["equality"], dict) and "type" in b["equality"]:
                    parts.append(c["name"] + " = " + ty(b["equality"]["type"]))
                else:
                    parts.append(c["name"] + ": _")
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in a:
            p = a["parenthesized"]
            return "(" + ", ".join(ty(x) for x in p.get("inputs", [])) + ") -> " + ty(p.get("output"))
        return ""

    def bound(b):
        if isinstance(b, dict) and "trait_bound" in b:
            tr = b["trait_bound"]["trait"]
            return tr["path"] + args(tr.get("args"))
        if isinstance(b, dict) and "outlives" in b:
            return b["outlives"]
        return "_"

    def generics(g):
        ps = []
        for p in (g or {}).get("params", []):
            k = p.get("kind", {})
            if "lifetime" in k:
                ps.append(p["name"])
            elif "type" in k:
                if k["type"].get("is_synthetic"):
                    continue
                bs = k["type"].get("bounds", [])
                ps.append(p["name"] + (": " + " + ".join(bound(b) for b in bs) if bs else ""))
            elif "const" in k:
                ps.append("const " + p["name"])
        return "<" + ", ".join(ps) + ">" if ps else ""

    def fn_sig(name, f):
        h = f.get("header", {})
        q = ("const " if h.get("is_const") else "") + ("async " if h.get("is_async") else "")
        q += "unsafe " if h.get("is_unsafe") else ""
        sig = f["sig"]
        ins = []
        for n, t in sig["inputs"]:
            if n == "self":
                ins.append({"&Self": "&self", "&mut Self": "&mut self", "Self": "self"}.get(ty(t), "self: " + ty(t)))
            else:
                ins.append(n + ": " + ty(t))
        out = sig.get("output")
        return q + "fn " + name + generics(f.get("generics")) + "(" + ", ".join(ins) + ")" + (
            " -> " + ty(out) if out is not None else ""
        )

    def public(it):
        return it.get("visibility") == "public"

    def emit_impls(path, impl_ids):
        for iid in impl_ids:
            im = item(iid)
            if not im:
                continue
            imp = im["inner"].get("impl")
            if not imp or imp.get("is_synthetic") or imp.get("blanket_impl"):
                continue
            tr = imp.get("trait")
            if tr:
                lines.add(path + " impl " + tr["path"] + args(tr.get("args")))
                continue
            for mid in imp.get("items", []):
                m = item(mid)
                if not m or not public(m):
                    continue
                mk = kind(m)
                if mk == "function":
                    lines.add(path + "::" + fn_sig(m["name"], m["inner"]["function"]))
                elif mk in ("assoc_const", "constant"):
                    lines.add(path + "::const " + m["name"])
                else:
                    lines.add(path + "::" + mk + " " + (m["name"] or ""))

    seen_modules = set()

    def emit(i, path):
        it = item(i)
        if it is None:
            lines.add("reexport " + path)
            return
        k = kind(it)
        inner = it["inner"][k]
        if k == "module":
            if (i, path) in seen_modules:
                return
            seen_modules.add((i, path))
            lines.add("mod " + path)
            walk(inner["items"], path)
        elif k == "struct":
            lines.add("struct " + path + generics(inner.get("generics")))
            sk = inner.get("kind", {})
            if "plain" in sk:
                if sk["plain"].get("has_stripped_fields"):
                    lines.add(path + " (private fields)")
                for fid in sk["plain"].get("fields", []):
                    f = item(fid)
                    if f and public(f):
                        lines.add(path + "." + f["name"] + ": " + ty(f["inner"].get("struct_field")))
            elif "tuple" in sk:
                fields = ["pub " + ty(item(x)["inner"].get("struct_field")) if x is not None and item(x) else "_" for x in sk["tuple"]]
                lines.add(path + "(" + ", ".join(fields) + ")")
            emit_impls(path, inner.get("impls", []))
        elif k == "enum":
            lines.add("enum " + path + generics(inner.get("generics")))
            for vid in inner.get("variants", []):
                v = item(vid)
                if v:
                    lines.add(path + "::" + v["name"])
            emit_impls(path, inner.get("impls", []))
        elif k == "trait":
            lines.add("trait " + path + generics(inner.get("generics")))
            for tid in inner.get("items", []):
                t = item(tid)
                if t and kind(t) == "function":
                    lines.add(path + "::" + fn_sig(t["name"], t["inner"]["function"]))
                elif t:
                    lines.add(path + "::" + kind(t) + " " + t["name"])
        elif k == "function":
            lines.add(path.rsplit("::", 1)[0] + "::" + fn_sig(path.rsplit("::", 1)[1], inner))
        elif k == "constant":
            lines.add("const " + path + ": " + ty(inner.get("type")))
        elif k == "static":
            lines.add("static " + path + ": " + ty(inner.get("type")))
        elif k == "type_alias":
            lines.add("type " + path + " = " + ty(inner.get("type")))
        elif k == "macro":
            lines.add("macro " + path)
        else:
            lines.add(k + " " + path)

    def walk(ids, prefix):
        for i in ids:
            it = item(i)
            if it is None or not public(it):
                continue
            k = kind(it)
            if k == "use":
                u = it["inner"]["use"]
                target = u.get("id")
                if u.get("is_glob"):
                    t = item(target) if target is not None else None
                    if t and kind(t) == "module":
                        walk(t["inner"]["module"]["items"], prefix)
                    else:
                        lines.add("reexport " + prefix + "::*")
                elif target is None:
                    lines.add("reexport " + prefix + "::" + u["name"])
                else:
                    emit(target, prefix + "::" + u["name"])
            elif k == "impl":
                continue
            else:
                emit(i, prefix + "::" + it["name"])

    root = item(doc["root"])
    walk(root["inner"]["module"]["items"], root["name"])
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
