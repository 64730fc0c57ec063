#!/usr/bin/env bash
# Packs what the GPU checks need to run on a machine with an NVIDIA GPU but without this
# machine's packages (a rented GPU box, a CI runner): the built GPU test and benchmark
# programs, libstrata, every shared library they load that is not glibc or part of the CUDA
# toolkit/driver (those come from the GPU machine), and Open MPI (for mpirun and the
# multi-rank CUDA tests). run_checks.sh, run there, unpacks and runs them.
#   scripts/gpu/bundle.sh BUILD_DIR OUT.tar.xz
set -euo pipefail
build=$(cd "${1:?usage: bundle.sh BUILD_DIR OUT.tar.xz}" && pwd)
out=${2:?usage: bundle.sh BUILD_DIR OUT.tar.xz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

programs=()
for p in tests/strata_gpu_tests tests/gpu_nccl tests/gpu_nccl_failure tests/gpu_nccl_failure_np2 tests/gpu_mpi_cuda tests/gpu_ddp \
         tests/gpu_zero tests/gpu_tp tests/gpu_expert_parallel benchmarks/bench_fused_adam benchmarks/bench_gpt2_gpu benchmarks/bench_attention_gpu \
         examples/train_gpt/train_gpt examples/train_llama/train_llama; do
  [ -x "$build/$p" ] && programs+=("$build/$p")
done
[ ${#programs[@]} -gt 0 ] || { echo "bundle.sh: no GPU programs in $build (built with CUDA?)" >&2; exit 2; }
mkdir -p "$stage/strata/bin" "$stage/strata/lib" "$stage/root"
cp "${programs[@]}" "$stage/strata/bin/"
cp "$(dirname "${BASH_SOURCE[0]}")/../../benchmarks/gpt2_gpu_torch.py" "$stage/strata/bin/"  # the PyTorch peer

# Open MPI, at its own absolute paths (its components and help files are found there).
mpi_files=$(dpkg -L libopenmpi3 openmpi-bin openmpi-common 2>/dev/null | while read -r f; do
  [ -f "$f" ] && echo "$f"; done || true)

# Shared libraries, resolved by ldd, minus glibc and what the GPU machine's CUDA provides.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink)'
libs=$( { ldd "${programs[@]}" "$build"/src/libstrata.so* $(echo "$mpi_files" | grep '\.so' || true) \
          $(echo "$mpi_files" | grep '/bin/' || true) 2>/dev/null || true; } |
        awk '/=> \// {print $1" "$3}' | sort -u | while read -r name path; do
          [[ $name =~ $skip ]] || echo "$path"; done | sort -u)
# MPI's own libraries go apart (lib-mpi): where the GPU machine has an Open MPI of its own,
# run_checks.sh uses that one whole, since its components load its own libraries.
mkdir -p "$stage/strata/lib-mpi"
mpi_lib='^lib(mpi|open-rte|open-pal|pmix|hwloc|event|fabric|uc[mpst]|psm|ibverbs|rdmacm|nl-|munge|efa|cxi)'
for l in $libs; do
  if [[ $(basename "$l") =~ $mpi_lib ]]; then cp -L "$l" "$stage/strata/lib-mpi/"; else cp -L "$l" "$stage/strata/lib/"; fi
done
cp -P "$build"/src/libstrata.so* "$stage/strata/lib/"
if [ -n "$mpi_files" ]; then
  echo "$mpi_files" | tar -C / -cf - -T - | tar -C "$stage/root" -xf -
  # The symlinks mpirun/orterun point to.
  for b in /usr/bin/mpirun /usr/bin/mpiexec /usr/bin/orterun /usr/bin/orted; do
    [ -e "$b" ] && cp -P "$b" "$stage/root/usr/bin/" 2>/dev/null || true
  done
fi
tar -C "$stage" -cf - strata root | xz -T2 -6 > "$out"
echo "bundle.sh: $(du -h "$out" | cut -f1) in $out: ${#programs[@]} programs, $(echo "$libs" | wc -w) libraries"
