#!/usr/bin/env bash
# The Kubernetes manifests in docker/kubernetes/ are ones a cluster would accept, short of
# running them (no cluster here):
#  1. every document of every manifest validates against the Kubernetes JSON schemas of
#     each pinned Kubernetes version (kubernetes-validate, strict: an unknown field fails;
#     a document whose kind or apiVersion has no schema fails too), and no YAML mapping
#     repeats a key (PyYAML keeps the last one silently; the API server refuses it);
#  2. every --flag in the containers' args is one fedagg-server knows: it appears as
#     "    --name (...)" in `fedagg-server --helpfull` (Abseil's format);
#  3. the documents fit together, for fedagg.yaml with either intermediates file:
#     selectors match the pods' labels, Services' target ports and probes' ports are named
#     container ports, --parent names the root's Service and port, --checkpoint_dir is the
#     root's PersistentVolumeClaim mount, $(VAR) in args is defined, scrape annotations
#     name the metrics port, Ingresses go to Services' ports, probes are /readyz and /healthz, the pods run as the image's
#     user (docker/Dockerfile.cpu), requests <= limits, --memory_budget_bytes is below the
#     memory limit, and intermediates-cpu.yaml and intermediates-gpu.yaml differ only in the
#     image, --backend, the nvidia.com/gpu limit and the GPU toleration;
#  4. the checks are live: broken copies (an unknown field, a wrong type, an unknown kind, a
#     repeated key, an unknown flag, a Service selecting nothing, an Ingress to no Service)
#     must each fail.
# kubernetes-validate comes from .venv-tools (scripts/setup.sh; it carries the schemas and
# downloads nothing: here it runs without a network where user namespaces allow).
# Exits 77 (ctest: skipped) when that environment is missing.
# Usage: kubernetes_manifests_test.sh FEDAGG_SERVER
set -euo pipefail
SERVER=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$REPO/.venv-tools
MANIFESTS=$REPO/docker/kubernetes
K8S_VERSIONS=(1.30 1.37)  # the oldest release these manifests are checked for, and the newest the validator bundles

if ! "$VENV/bin/python" -c "import kubernetes_validate, yaml" 2>/dev/null; then
  echo "SKIPPED: kubernetes-validate is not installed in $VENV (scripts/setup.sh installs it)"
  exit 77
fi
FILES=("$MANIFESTS/fedagg.yaml" "$MANIFESTS/intermediates-cpu.yaml" "$MANIFESTS/intermediates-gpu.yaml")
for file in "${FILES[@]}"; do [ -f "$file" ] || { echo "missing: $file" >&2; exit 1; }; done
extra=$(find "$MANIFESTS" -name '*.yaml' -o -name '*.yml' | grep -vxF -f <(printf '%s\n' "${FILES[@]}") || true)
[ -z "$extra" ] || { echo "manifests this test does not know (add them to FILES): $extra" >&2; exit 1; }

WORK=$(mktemp -d /tmp/fedagg-k8s-manifests.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# Without a network where possible: the validator must need none.
OFFLINE=()
if unshare -rn true 2>/dev/null; then OFFLINE=(unshare -rn); fi

PY=("$VENV/bin/python" "$(dirname "$0")/kubernetes_manifests.py")

# validate FILE...: 0 when every document passed for every pinned version and nothing else
# was said (kubernetes-validate only warns, exit status 0, for a kind it has no schema for).
validate() {
  local args=() version out rc=0 documents=0 file n
  for version in "${K8S_VERSIONS[@]}"; do args+=(-k "$version"); done
  for file in "$@"; do
    n=$("${PY[@]}" count "$file") || return 1
    documents=$((documents + n))
  done
  out=$("${OFFLINE[@]}" "$VENV/bin/kubernetes-validate" --strict "${args[@]}" "$@" 2>&1) || rc=$?
  printf '%s\n' "$out"
  local passed
  passed=$(grep -c '^INFO .* passed for resource ' <<<"$out" || true)
  [ "$rc" = 0 ] && ! grep -qv '^INFO ' <<<"$out" && [ "$passed" = $((documents * ${#K8S_VERSIONS[@]})) ]
}

# helpfull_flags: the flag names fedagg-server --helpfull lists ("    --name (help); default: ...;",
# four spaces; wrapped help lines are indented by six). Boolean flags also as --noname.
helpfull_flags() {
  local help
  help=$("$SERVER" --helpfull 2>&1 || true)  # Abseil exits 1 after printing help
  sed -nE 's/^    --([A-Za-z_][A-Za-z0-9_]*) \(.*$/\1/p' <<<"$help"
  awk '/^    --[A-Za-z_][A-Za-z0-9_]* \(/ { name = $1; sub(/^--/, "", name) }
       /; default: (true|false);$/ && name != "" { print "no" name; name = "" }' <<<"$help"
}

# check_flags FILE...: every flag in the files' args is one fedagg-server lists.
check_flags() {
  local unknown=0 flag used
  used=$("${PY[@]}" flags "$@")
  [ -n "$used" ] || { echo "no flags found in $*" >&2; return 1; }
  for flag in $used; do
    if ! grep -qxF "$flag" <<<"$KNOWN"; then
      echo "--$flag is not a flag of fedagg-server (not in its --helpfull)"
      unknown=1
    fi
  done
  return "$unknown"
}

failed=0
echo "== schemas (kubernetes-validate $("$VENV/bin/kubernetes-validate" --version), strict, Kubernetes ${K8S_VERSIONS[*]}${OFFLINE:+, no network})"
validate "${FILES[@]}" || { echo "FAILED: schema validation" >&2; failed=1; }

echo "== flags against $SERVER --helpfull"
KNOWN=$(helpfull_flags | sort -u)
grep -qxF listen <<<"$KNOWN" ||
  { echo "FAILED: $SERVER --helpfull lists no fedagg-server flags (not even --listen)" >&2; exit 1; }
echo "fedagg-server --helpfull lists $(wc -l <<<"$KNOWN") flag names"
if check_flags "${FILES[@]}"; then
  echo "every flag in the manifests ($("${PY[@]}" flags "${FILES[@]}" | sort -u | wc -l) distinct) is known"
else
  echo "FAILED: unknown flags" >&2; failed=1
fi

echo "== cross-references"
if "${PY[@]}" check "$REPO/docker/Dockerfile.cpu" "${FILES[@]}"; then
  echo "selectors, ports, probes, --parent, --checkpoint_dir, users, resources agree; CPU and GPU Deployments alike"
else
  echo "FAILED: cross-references" >&2; failed=1
fi

echo "== the checks are live: each broken copy must fail"
expect_failure() {  # WHAT CHECK BREAK FILE
  local what=$1 check=$2 break=$3 file=$4 copy
  copy=$WORK/$break-$(basename "$file")
  "${PY[@]}" "$break" "$file" "$copy"
  local out rc=0
  case $check in
    schema) out=$(validate "$copy" 2>&1) || rc=$? ;;
    flags) out=$(check_flags "$copy" 2>&1) || rc=$? ;;
    refs)
      local root=${MANIFESTS}/fedagg.yaml cpu=$MANIFESTS/intermediates-cpu.yaml
      [ "$(basename "$file")" = fedagg.yaml ] && root=$copy || cpu=$copy
      out=$("${PY[@]}" check "$REPO/docker/Dockerfile.cpu" "$root" "$cpu" "$MANIFESTS/intermediates-gpu.yaml" 2>&1) || rc=$? ;;
  esac
  if [ "$rc" = 0 ]; then
    echo "FAILED: $what in $(basename "$file") was not caught:" >&2; printf '%s\n' "$out" >&2; failed=1
  else
    echo "caught: $what in $(basename "$file"): $(grep -m1 -E 'ERROR|WARN|repeated|not a flag|selects no|could not|Couldn' <<<"$out" || head -n1 <<<"$out")"
  fi
}
for file in "${FILES[@]}"; do
  expect_failure "an unknown container field" schema unknown-field "$file"
  expect_failure "replicas: \"two\"" schema wrong-type "$file"
done
expect_failure "an unknown kind" schema unknown-kind "$MANIFESTS/intermediates-gpu.yaml"
expect_failure "a repeated key" schema repeated-key "$MANIFESTS/fedagg.yaml"
expect_failure "an unknown flag" flags unknown-flag "$MANIFESTS/intermediates-cpu.yaml"
expect_failure "Services selecting no pod" refs no-selection "$MANIFESTS/fedagg.yaml"
expect_failure "an Ingress to no Service" refs ingress-to-nothing "$MANIFESTS/fedagg.yaml"

[ "$failed" = 0 ] && echo "PASSED: docker/kubernetes/*.yaml"
exit "$failed"
