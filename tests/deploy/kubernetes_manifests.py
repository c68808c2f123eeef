"""The Kubernetes manifests test's helpers (tests/deploy/kubernetes_manifests_test.sh runs them):
load manifests (refusing repeated keys), list flags, cross-check, break copies."""
import re
import sys

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    pass


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"repeated key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load(path):
    with open(path) as f:
        try:
            return [d for d in yaml.load_all(f, Loader=UniqueKeyLoader) if d]
        except yaml.YAMLError as e:
            sys.exit(f"{path}: {e}".replace("\n", " "))


def pod_templates(docs):
    for d in docs:
        if d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield d, d["spec"]["template"]


def containers(docs):
    for workload, template in pod_templates(docs):
        spec = template["spec"]
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            yield workload, template, c


def flags(docs):
    """The flag names of every container's args (and command, after the program)."""
    for _, _, c in containers(docs):
        for token in c.get("command", [])[1:] + c.get("args", []):
            m = re.match(r"^--?([A-Za-z_][A-Za-z0-9_]*)", str(token))
            if m:
                yield m.group(1)


def arg(c, name):
    values = [a.split("=", 1)[1] for a in c.get("args", []) if a.startswith(f"--{name}=")]
    return values[-1] if values else None


UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
         "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(q):
    m = re.fullmatch(r"([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", str(q))
    if not m:
        raise ValueError(f"quantity not understood: {q!r}")
    return float(m.group(1)) * UNITS[m.group(2) or ""]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check(docs, image_uid):
    """Cross-references a cluster would need; returns the problems found."""
    problems = []
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    problems += [f"{k}/{n} defined twice" for k, n in set(names) if names.count((k, n)) > 1]
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    templates = list(pod_templates(docs))
    for workload, template in templates:
        name = f'{workload["kind"]}/{workload["metadata"]["name"]}'
        labels = template["metadata"].get("labels", {})
        if not matches(workload["spec"]["selector"]["matchLabels"], labels):
            problems.append(f"{name}: selector does not match its pod labels")
        spec = template["spec"]
        sc = spec.get("securityContext", {})
        if not sc.get("runAsNonRoot") or sc.get("runAsUser") != image_uid:
            problems.append(f"{name}: not runAsNonRoot with runAsUser {image_uid} (the image's user)")
        claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        if claims and sc.get("fsGroup") is None:
            problems.append(f"{name}: a PersistentVolumeClaim but no fsGroup to make it writable")
        volumes = claims | {v["name"] for v in spec.get("volumes", [])}
        ann = template["metadata"].get("annotations", {})
        for c in spec["containers"]:
            where = f'{name} container {c["name"]}'
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"),
                                ("startupProbe", None)):
                if probe not in c:
                    if path:
                        problems.append(f"{where}: no {probe}")
                    continue
                get = c[probe].get("httpGet", {})
                if path and get.get("path") != path:
                    problems.append(f"{where}: {probe} is not GET {path}")
                if get.get("port") not in ports and get.get("port") not in ports.values():
                    problems.append(f"{where}: {probe} port {get.get('port')} is not a container port")
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            problems += [f"{where}: volumeMount {n} has no volume" for n in mounts.values() if n not in volumes]
            env = {e["name"] for e in c.get("env", [])}
            for a in c.get("args", []):
                problems += [f"{where}: {a} uses undefined $({v})" for v in re.findall(r"\$\((\w+)\)", a) if v not in env]
            metrics = arg(c, "metrics_address")
            if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/metrics":
                problems.append(f"{name}: no prometheus.io/scrape \"true\" and path /metrics annotations")
            if metrics is None or ann.get("prometheus.io/port") != metrics.rsplit(":", 1)[1] \
                    or int(metrics.rsplit(":", 1)[1]) != ports.get("metrics"):
                problems.append(f"{where}: prometheus.io/port, --metrics_address and the metrics port disagree")
            parent = arg(c, "parent")
            if parent:
                host, port = parent.rsplit(":", 1)
                svc = services.get(host)
                if svc is None or int(port) not in [p["port"] for p in svc["spec"]["ports"]]:
                    problems.append(f"{where}: --parent={parent} is not a Service's name and port")
            ckpt = arg(c, "checkpoint_dir")
            if ckpt and mounts.get(ckpt) not in claims:
                problems.append(f"{where}: --checkpoint_dir={ckpt} is not a PersistentVolumeClaim's mount")
            res = c.get("resources", {})
            req, lim = res.get("requests", {}), res.get("limits", {})
            for r in ("cpu", "memory"):
                if r not in req or r not in lim:
                    problems.append(f"{where}: no {r} request and limit")
                elif quantity(req[r]) > quantity(lim[r]):
                    problems.append(f"{where}: {r} request above its limit")
            for r in set(req) | set(lim):
                if "/" in r and r in req and (r not in lim or quantity(req[r]) != quantity(lim[r])):
                    problems.append(f"{where}: {r}: an extended resource's request must equal its limit")
            budget = arg(c, "memory_budget_bytes")
            if budget and "memory" in lim and int(budget) >= quantity(lim["memory"]):
                problems.append(f"{where}: --memory_budget_bytes is not below the memory limit")
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        if kind in ("Service", "PodDisruptionBudget"):
            selector = d["spec"]["selector"] if kind == "Service" else d["spec"]["selector"]["matchLabels"]
            chosen = [t for _, t in templates if matches(selector, t["metadata"].get("labels", {}))]
            if not chosen:
                problems.append(f"{kind}/{name}: selects no pod")
        if kind == "Service":
            for p in d["spec"]["ports"]:
                target = p.get("targetPort", p["port"])
                known = [q.get("name") if isinstance(target, str) else q["containerPort"]
                         for t in chosen for c in t["spec"]["containers"] for q in c.get("ports", [])]
                if chosen and target not in known:
                    problems.append(f"Service/{name}: targetPort {target} is no port of its pods")
        if kind == "PodDisruptionBudget" and ("minAvailable" in d["spec"]) == ("maxUnavailable" in d["spec"]):
            problems.append(f"PodDisruptionBudget/{name}: needs exactly one of minAvailable, maxUnavailable")
        if kind == "Ingress":
            for rule in d["spec"].get("rules", []):
                for path in rule.get("http", {}).get("paths", []):
                    service = path["backend"]["service"]
                    port = service["port"].get("name", service["port"].get("number"))
                    target = services.get(service["name"])
                    if target is None or port not in [q.get("name", q["port"]) for q in target["spec"]["ports"]] + \
                            [q["port"] for q in target["spec"]["ports"]]:
                        problems.append(f"Ingress/{name}: {path['path']} goes to {service['name']}:{port}, "
                                        "no Service port here")
        if kind == "StatefulSet":
            governing = services.get(d["spec"].get("serviceName"))
            if governing is None or governing["spec"].get("clusterIP") != "None":
                problems.append(f"StatefulSet/{name}: serviceName is not a headless Service here")
    return problems


def without_gpu(deployment):
    """The Deployment less what may differ between the CPU and GPU files."""
    import copy
    d = copy.deepcopy(deployment)
    spec = d["spec"]["template"]["spec"]
    spec.pop("tolerations", None)
    for c in spec["containers"]:
        c.pop("image")
        c["args"] = [a for a in c.get("args", []) if not a.startswith("--backend=")]
        c.get("resources", {}).get("limits", {}).pop("nvidia.com/gpu", None)
    return d


def main():
    command, paths = sys.argv[1], sys.argv[2:]
    if command == "count":  # documents in a file (refusing repeated keys)
        print(len(load(paths[0])))
    elif command == "flags":
        for path in paths:
            print("\n".join(sorted(set(flags(load(path))))))
    elif command == "check":  # DOCKERFILE ROOT_FILE INTERMEDIATES_CPU INTERMEDIATES_GPU
        uid = int(re.search(r"--uid (\d+)", open(paths[0]).read()).group(1))
        root, cpu, gpu = load(paths[1]), load(paths[2]), load(paths[3])
        problems = []
        for label, variant in (("cpu", cpu), ("gpu", gpu)):
            problems += [f"fedagg.yaml + intermediates-{label}.yaml: {p}" for p in check(root + variant, uid)]
        deployments = [[d for d in docs if d["kind"] == "Deployment"] for docs in (cpu, gpu)]
        if [len(x) for x in deployments] != [1, 1]:
            problems.append("each intermediates file must hold exactly one Deployment")
        else:
            (c,), (g,) = deployments
            gspec = g["spec"]["template"]["spec"]
            if without_gpu(c) != without_gpu(g):
                problems.append("the CPU and GPU Deployments differ beyond image, --backend, GPU limit, toleration")
            if any("nvidia.com/gpu" in x.get("resources", {}).get("limits", {})
                   for x in c["spec"]["template"]["spec"]["containers"]) or "tolerations" in c["spec"]["template"]["spec"]:
                problems.append("intermediates-cpu.yaml asks for a GPU")
            if quantity(gspec["containers"][0].get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) != 1 \
                    or not any(t.get("key") == "nvidia.com/gpu" and t.get("effect") == "NoSchedule"
                               for t in gspec.get("tolerations", [])):
                problems.append("intermediates-gpu.yaml: no nvidia.com/gpu: 1 limit and NoSchedule toleration")
            for label, docs in (("cpu", c), ("gpu", g)):
                image = docs["spec"]["template"]["spec"]["containers"][0]["image"]
                if image.rsplit("/", 1)[-1].split(":")[0].split("@")[0] != f"fedagg-{label}":
                    problems.append(f"intermediates-{label}.yaml: image {image} is not fedagg-{label}")
        if problems:
            sys.exit("\n".join(problems))
    elif command in ("unknown-field", "wrong-type", "unknown-kind", "repeated-key", "unknown-flag",
                     "no-selection", "ingress-to-nothing"):  # IN OUT: a broken copy of IN
        text = open(paths[0]).read()
        docs = load(paths[0])
        workload = next(d for d in docs if d["kind"] in ("Deployment", "StatefulSet"))
        container = workload["spec"]["template"]["spec"]["containers"][0]
        if command == "unknown-field":
            container["fedaggUnknownField"] = "x"
        elif command == "wrong-type":
            workload["spec"]["replicas"] = "two"
        elif command == "unknown-kind":
            workload["kind"] = workload["kind"] + "Typo"
        elif command == "unknown-flag":
            container["args"].append("--fedagg_no_such_flag=1")
        elif command == "no-selection":
            for d in docs:
                if d["kind"] == "Service":
                    d["spec"]["selector"] = {"app.kubernetes.io/name": "nothing"}
        elif command == "ingress-to-nothing":
            ingress = next(d for d in docs if d["kind"] == "Ingress")
            ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = "fedagg-nothing"
        if command == "repeated-key":
            out = text.replace("\nkind: ", "\nkind: Secret\nkind: ", 1)
            assert out != text
        else:
            out = yaml.safe_dump_all(docs, sort_keys=False)
        open(paths[1], "w").write(out)
    else:
        sys.exit(f"unknown command {command}")


main()
