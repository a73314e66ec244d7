#!/usr/bin/env bash
# Provides a local BigQuery emulator for the tests and prints the path of its launcher as the last stdout
# line. Progress goes to stderr.
#
# The emulator is bqemulator (PyPI; REST API on DuckDB), installed once with the machine's Python into a
# virtualenv in the same cache as the control plane, keyed by version. goccy/bigquery-emulator was the first
# choice, but the Go module proxy here serves only v0.6.x, which needs cgo and a ZetaSQL C++ build of an hour
# or more on two cores (ADR 1101). With BIGQUERY_EMULATOR_BIN naming an executable that accepts bqemulator's
# `start --host --port` arguments, that one is used instead. Idempotent: a warm run returns at once.
set -euo pipefail

BQEMULATOR_VERSION=1.4.0
# bqemulator loads DuckDB's spatial extension at start and would download it from DuckDB's extension site,
# which is out of reach here; the same extension ships on PyPI for an exact DuckDB version, so both are pinned.
# numpy: its DuckDB result conversion needs it and does not declare it.
DUCKDB_VERSION=1.5.5

cache_root="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/bigquery-emulator"
log() { printf '[bigquery-emulator install] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -n "${BIGQUERY_EMULATOR_BIN:-}" ]]; then
  [[ -x "$BIGQUERY_EMULATOR_BIN" ]] || die "BIGQUERY_EMULATOR_BIN=$BIGQUERY_EMULATOR_BIN is not executable"
  printf '%s\n' "$BIGQUERY_EMULATOR_BIN"
  exit 0
fi

dest="$cache_root/bqemulator-$BQEMULATOR_VERSION-duckdb-$DUCKDB_VERSION"
launcher="$dest/run-emulator"
# A venv records its own path in its launchers, so it is built in place; the marker is written last, and a
# folder without it is a killed install.
complete="$dest/.tollgate-complete"
if [[ -f "$complete" ]]; then
  printf '%s\n' "$launcher"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.install.lock"
# Two test files (or two engineers' runs) on a cold cache must not both install.
if ! flock -n 9; then
  log "another install holds $cache_root/.install.lock; waiting"
  flock 9
fi
if [[ -f "$complete" ]]; then
  printf '%s\n' "$launcher"
  exit 0
fi

python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    python=$(command -v "$candidate")
    break
  fi
done
[[ -n "$python" ]] || die "Python >= 3.11 is required to install the BigQuery emulator (or set BIGQUERY_EMULATOR_BIN)"

log "installing bqemulator $BQEMULATOR_VERSION with $("$python" --version) into $dest (first run downloads about 150 MB of wheels)"
started=$SECONDS
rm -rf "$dest"
"$python" -m venv "$dest"
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  "bqemulator==$BQEMULATOR_VERSION" "duckdb==$DUCKDB_VERSION" "duckdb-extension-spatial==$DUCKDB_VERSION" "numpy>=1.26" >&2
[[ -x "$dest/bin/bqemulator" ]] || die "bqemulator installed but $dest/bin/bqemulator is missing"
# DuckDB finds installed extensions under $HOME/.duckdb/extensions/<version>/<platform>: give the emulator a
# HOME of its own holding the packaged extension, so its INSTALL spatial finds it and downloads nothing.
HOME="$dest/duckdb-home" "$dest/bin/python" - <<'PY' >&2
import duckdb, importlib.util, os, shutil
version = duckdb.__version__
connection = duckdb.connect()
platform = connection.execute("PRAGMA platform").fetchone()[0]
package = os.path.dirname(importlib.util.find_spec("duckdb_extension_spatial").origin)
target = os.path.expanduser(f"~/.duckdb/extensions/v{version}/{platform}")
os.makedirs(target, exist_ok=True)
shutil.copy(os.path.join(package, "extensions", f"v{version}", "spatial.duckdb_extension"), target)
connection.execute("INSTALL spatial")
connection.execute("LOAD spatial")
print(f"duckdb {version} spatial extension placed in {target}")
PY
cat >"$launcher" <<SH
#!/usr/bin/env bash
# Starts bqemulator with the DuckDB home that holds its spatial extension (see bigquery-install.sh).
export HOME="$dest/duckdb-home"
exec "$dest/bin/bqemulator" "\$@"
SH
chmod +x "$launcher"
touch "$complete"
log "installed in $((SECONDS - started)) s: $launcher"
printf '%s\n' "$launcher"
