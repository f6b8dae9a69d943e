#!/usr/bin/env python3
"""Checks deploy/grafana/nodevol.json against what the programs export.

    check_dashboard.py DASHBOARD METRICS_FILE...

METRICS_FILE: a Prometheus text exposition scraped from a running nodevold
or nodevol-provisioner. Fails (exit 1, one line per finding) when:
  - the dashboard is not well formed: unique panel ids, a title, every
    query on the ${datasource} variable, grid positions inside 24 columns;
  - a query names a metric no program exports (a # TYPE line; histograms'
    _bucket, _sum and _count count as their family's);
  - a label matcher {label...} names a label the family's samples never
    carry, or a `by (...)`/`on(...)` label is on none of the query's
    families (target labels Prometheus adds - instance, job, pod,
    namespace - and le excepted); a family with no samples in the scrape
    has its labels reported unverified;
  - a template variable queries an unexported metric or label.
"""
import json, re, sys

TARGET_LABELS = {"instance", "job", "pod", "namespace", "le"}
FUNCTIONS = {"sum", "rate", "irate", "increase", "histogram_quantile", "max", "min", "avg", "count",
             "by", "on", "and", "or", "unless", "without", "ignoring", "label_values", "topk", "bottomk",
             "delta", "deriv", "abs", "clamp_min", "clamp_max", "time", "vector", "scalar", "group_left",
             "group_right", "offset", "bool"}

def exported(files):
    families, labels = {}, {}
    for f in files:
        for line in open(f):
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                families[m.group(1)] = m.group(2)
                labels.setdefault(m.group(1), set())
                continue
            if line.startswith("#") or not line.strip():
                continue
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
            if not m:
                continue
            name = family_of(m.group(1), families)
            sampled.add(name)
            for lm in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""):
                labels.setdefault(name, set()).add(lm.group(1))
    return families, labels

sampled = set()  # families with at least one sample in the scrape

def family_of(name, families):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and families.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return name

def check_expr(where, expr, families, labels, bad):
    # Drop string literals and Grafana's $variables before looking for names.
    plain = re.sub(r'"[^"]*"', '""', expr)
    plain = re.sub(r"\$\{?[a-zA-Z_]+\}?", "1", plain)
    used = []
    # Label lists of by (...), on (...) are checked below, not taken for metrics.
    grouping = list(re.finditer(r"\b(by|on|without|ignoring)\s*\(([^)]*)\)", plain))
    names_only = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", " ", plain)
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?", names_only):
        name, matchers = m.group(1), m.group(3)
        if name in FUNCTIONS or re.fullmatch(r"[0-9.e]+", name):
            continue
        fam = family_of(name, families)
        if fam not in families:
            bad.append(f"{where}: metric {name} is exported by no program")
            continue
        used.append(fam)
        for lm in re.finditer(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)", matchers or ""):
            label = lm.group(1)
            if label not in TARGET_LABELS and fam in sampled and label not in labels[fam]:
                bad.append(f"{where}: {fam} has no label {label} (it has {sorted(labels[fam])})")
    have = set(TARGET_LABELS)
    for fam in used:
        have |= labels.get(fam, set())
    # A family without samples (nothing happened yet) shows no labels.
    unknown = any(fam not in sampled for fam in used)
    for m in grouping:
        for label in filter(None, (l.strip() for l in m.group(2).split(","))):
            if label not in have and not unknown:
                bad.append(f"{where}: {m.group(1)} ({label}): no family of the query has that label")
    return used

def main():
    dash = json.load(open(sys.argv[1]))
    families, labels = exported(sys.argv[2:])
    bad, ids, queried = [], set(), set()
    if not dash.get("title") or not dash.get("uid"):
        bad.append("dashboard: no title or uid")
    names = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    if "datasource" not in names:
        bad.append("dashboard: no datasource variable")
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*([a-zA-Z_]+)\)", q)
            if not m:
                bad.append(f"variable {v['name']}: not label_values(selector, label): {q}")
                continue
            used = check_expr(f"variable {v['name']}", m.group(1), families, labels, bad)
            for fam in used:
                if m.group(2) not in TARGET_LABELS and m.group(2) not in labels[fam]:
                    bad.append(f"variable {v['name']}: {fam} has no label {m.group(2)}")
            queried |= set(used)
    for p in dash["panels"]:
        if p["id"] in ids:
            bad.append(f"panel id {p['id']} twice")
        ids.add(p["id"])
        g = p.get("gridPos", {})
        if g.get("x", 0) + g.get("w", 0) > 24:
            bad.append(f"panel {p.get('title')}: wider than the 24 columns")
        if p["type"] == "row":
            continue
        if not p.get("title"):
            bad.append(f"panel {p['id']}: no title")
        if not p.get("targets"):
            bad.append(f"panel {p.get('title')}: no query")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                bad.append(f"panel {p.get('title')}: query {t.get('refId')} not on ${{datasource}}")
            queried |= set(check_expr(f"panel {p.get('title')!r}", t["expr"], families, labels, bad))
    if bad:
        print("\n".join("FAIL: " + b for b in bad), file=sys.stderr)
        sys.exit(1)
    unused = sorted(set(families) - queried)
    unverified = sorted(f for f in queried if f not in sampled)
    print(f"ok: {sum(1 for p in dash['panels'] if p['type'] != 'row')} panels query {len(queried)} of the "
          f"{len(families)} exported families; not on the dashboard: {', '.join(unused) or 'none'}; "
          f"labels unverified (no samples in the scrape): {', '.join(unverified) or 'none'}")

main()
