#!/usr/bin/env bash
# Installs every build, test and run dependency of mapfuse from Debian 12 packages.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libopenmpi-dev openmpi-bin           # Open MPI (cluster/)
  libhdf5-dev hdf5-tools               # HDF5 results (results/)
  libtomlplusplus-dev                  # TOML++ (architectures, studies)
  doctest-dev                          # unit tests
  libbenchmark-dev                     # micro-benchmarks (Google Benchmark)
  libcli11-dev libfmt-dev nlohmann-json3-dev
  libyaml-cpp-dev                      # Timeloop / DOSA problem YAML
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX importer
  libarchive-dev                       # reading .csv.tar.gz datasets
  libtorch-dev                         # GET-fusion GNN classifier and explainers (libtorch 1.13, CPU)
  libopenblas0-serial                  # the BLAS libtorch multiplies with (Debian's default is the reference BLAS, 2-5x slower here; serial: one thread per rank)
  libboost-dev libeigen3-dev
  coinor-libcbc-dev                    # CBC MILP solver (WACO, engine/search/stream/waco.cpp)
  slurm-wlm munge                      # the single-node Slurm of the batch-script test
  python3-h5py python3-matplotlib python3-numpy python3-pandas  # reports and h5py checks (/usr/bin/python3)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
  --no-install-recommends "${missing[@]}" >/dev/null
