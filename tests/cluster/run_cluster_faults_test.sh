#!/usr/bin/env bash
# Network faults on the namespaced hosts (cluster_up.sh): 2 hosts, one train_gpt rank on each,
# started with cluster_mpirun.sh. Each case checks what a user of strata would rely on:
#   1. link down: strata-h1's link goes down during training (ip link set strata-v1 down, in
#      the root namespace). Both ranks -- the one on strata-h0 and the one cut off on
#      strata-h1 -- must fail within --collective-timeout (+ a margin) with strata's message
#      naming the op, its sequence number, the group and the other rank; and mpirun, told to
#      probe its daemons (TCP keepalive on Open MPI's out-of-band channel), must end with
#      Open MPI's "lost communication with a remote daemon" instead of waiting for ever.
#   2. packet loss: 2% of the packets through strata-h1's eth0, each way, are dropped at
#      random (nftables `numgen random`; sch_netem is not needed). The same fixed-seed run
#      must give the same per-step losses, digit for digit, and a bitwise identical final
#      model (the saved checkpoint exported with strata-ckpt, compared byte for byte) as a
#      clean run -- TCP retransmits, so only the time may differ. Where the kernel has
#      sch_netem the lossy run also has 1 ms of delay each way; where not, it says so.
#   3. host killed: while train_gpt saves a checkpoint every 3 steps, every process on
#      strata-h1 (its orted and rank) gets SIGKILL. mpirun must end on its own; the
#      checkpoint that `latest` names must pass `strata-ckpt verify`, and training must
#      resume from it on strata-h0 alone (1 rank, the same global batch).
#   4. bad host: with strata-h1's link down, cluster_mpirun.sh fails at once naming
#      strata-h1 (its reachability pre-check); a host name that is not in the cluster fails
#      at once naming that host (rsh_agent.sh, where Open MPI's own message names none).
# The cluster is removed on every exit path (end, failure, interrupt).
#   tests/cluster/run_cluster_faults_test.sh [--build DIR] [--keep DIR]
#     --build DIR   the build directory (default $STRATA_BUILD_DIR, else <repo>/build)
#     --ckpt-tool P strata-ckpt (default <build>/tools/strata_ckpt/strata-ckpt; '' where it
#                   is not built, without CLI11: the test then skips)
#     --keep DIR    keep the ranks' outputs and checkpoints in DIR (default: a temporary
#                   directory, removed at the end)
# Exit status: 0 passed, 1 failed, 77 skipped (not root, a tool missing -- nft from the
# Debian package nftables included --, or the kernel refuses namespaces, veth or bridges).
# Environment: STRATA_CLUSTER_REQUIRED=1 turns a skip into a failure; STRATA_FAULTS_MARGIN
# seconds a rank may take past its collective timeout (default 2).
# shellcheck disable=SC2016  # wait_until's conditions are evaluated later, on purpose
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${STRATA_BUILD_DIR:-$repo/build} keep="" ckpt_tool=default
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ckpt-tool) ckpt_tool=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "run_cluster_faults_test: unknown argument $1" >&2; exit 1 ;;
  esac
done
build=$(realpath -m "$build")
margin=${STRATA_FAULTS_MARGIN:-2}
# shellcheck source=tests/test_script_log.sh
source "$here/../test_script_log.sh"
test_script_log cluster-faults STRATA_CLUSTER_REQUIRED

# --- can this machine make hosts and faults? ----------------------------------------------
PATH=$PATH:/usr/sbin:/sbin
# shellcheck source=tests/cluster/lib.sh
source "$here/lib.sh"
reason=$(cluster_probe) || skip "$reason"
command -v mpirun >/dev/null || skip "missing command: mpirun (package openmpi-bin)"
command -v nft >/dev/null || skip "missing command: nft (package nftables), for the packet-loss case"
unshare --net -- nft add table inet probe 2>/dev/null ||
  skip "nft cannot add a table (kernel without nf_tables?), for the packet-loss case"
netem=0
unshare --net -- sh -c 'ip link set lo up && tc qdisc add dev lo root netem delay 1ms' 2>/dev/null && netem=1
gpt=$build/examples/train_gpt/train_gpt
[ "$ckpt_tool" != default ] || ckpt_tool=$build/tools/strata_ckpt/strata-ckpt
[ -n "$ckpt_tool" ] || skip "strata-ckpt is not built (no CLI11): it verifies and exports the checkpoints"
for b in "$gpt" "$ckpt_tool"; do [ -x "$b" ] || fail "$b is missing: build train_gpt and strata_ckpt first"; done

# --- the cluster, and teardown on every exit path -------------------------------------------
if [ -n "$keep" ]; then out=$(realpath -m "$keep"); mkdir -p "$out"
else out=$(mktemp -d "${TMPDIR:-/tmp}/strata-cluster-faults.XXXXXX"); fi
mpirun_pid=""
teardown() {
  [ -z "$mpirun_pid" ] || kill -KILL "$mpirun_pid" 2>/dev/null || true
  "$here/cluster_down.sh" --owner $$
  [ -n "$keep" ] || rm -rf "$out"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$here/cluster_up.sh" --hosts 2 --owner $$
cd "$out"
export STRATA_CLUSTER_SLOTS=1  # one rank per host
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }  # b - a, seconds
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

# Starts `cluster_mpirun.sh -np 2 [mpirun options] -- program args` in the background. Each
# rank runs under a wrapper that writes, on its own host, NAME/r<rank>.out and .err and, when
# the rank ends, NAME/r<rank>.exit = "<status> <time>": the files do not depend on mpirun's
# output forwarding, which a dead link cuts. mpirun's own output goes to NAME/mpirun.txt.
launch() {
  local name=$1; shift
  local mpi_opts=()
  while [ "$1" != -- ]; do mpi_opts+=("$1"); shift; done
  shift
  rm -rf "${out:?}/$name"; mkdir -p "$out/$name"
  # shellcheck disable=SC2016  # expanded by each rank's shell
  "$here/cluster_mpirun.sh" -np 2 "${mpi_opts[@]}" sh -c \
    'r=$OMPI_COMM_WORLD_RANK d=$1; shift; "$@" >"$d/r$r.out" 2>"$d/r$r.err"; s=$?; echo "$s $(date +%s.%N)" >"$d/r$r.exit"; exit $s' \
    rank "$out/$name" "$@" >"$out/$name/mpirun.txt" 2>&1 &
  mpirun_pid=$!
}
# Waits up to $2 seconds for the shell condition $1; false when it did not come true.
wait_until() {
  local deadline=$((SECONDS + $2))
  until eval "$1"; do [ $SECONDS -lt $deadline ] || return 1; sleep 0.1; done
}
# Waits up to $1 seconds for the background mpirun; false (and mpirun killed) when it ran on.
# Sets mpirun_rc.
wait_mpirun() {
  wait_until '! kill -0 $mpirun_pid 2>/dev/null' "$1" || { kill -KILL "$mpirun_pid"; wait "$mpirun_pid" || true; mpirun_pid=""; return 1; }
  mpirun_rc=0; wait "$mpirun_pid" || mpirun_rc=$?
  mpirun_pid=""
}
steps_logged() { local n; n=$(grep -c '^step ' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
# Back to a clean cluster between cases: every process on the hosts killed, links up, no
# nftables rules.
reset_hosts() {
  local h
  for h in $(cluster_hosts); do
    # shellcheck disable=SC2046  # one pid per word
    kill -KILL $(cluster_host_procs "$h") 2>/dev/null || true
    "$here/host_exec.sh" "$h" nft delete table inet strata_faults 2>/dev/null || true
    "$here/host_exec.sh" "$h" tc qdisc del dev eth0 root 2>/dev/null || true
  done
  ip link set "$(cluster_veth 1)" up
  wait_until '[ -z "$(cluster_host_procs strata-h0)$(cluster_host_procs strata-h1)" ]' 5 ||
    fail "processes on the hosts survived SIGKILL"
  wait_until 'cluster_reachable strata-h0 strata-h1 1 >/dev/null' 10 || fail "strata-h1 unreachable after the reset"
}
train=("$gpt" --batch 8 --metrics '' --eval-examples 20 --seed 7)

# --- 1. link down ---------------------------------------------------------------------------
T=3
log "1. link down: strata-h1's link goes down during training (--collective-timeout $T)"
# Once rank 0 has failed, mpirun tells the daemon on strata-h1 to kill its rank, over a TCP
# connection that can no longer deliver, and waits until the kernel gives up on it: with
# the default net.ipv4.tcp_retries2=15 that is about 15 minutes. On mpirun's host (a
# per-namespace setting) 4 retries give up after about 6 s, still longer than the collective
# timeout, so that no TCP error overtakes strata's report.
"$here/host_exec.sh" strata-h0 sysctl -q -w net.ipv4.tcp_retries2=4
launch linkdown -- "${train[@]}" --steps 100000 --log-every 2 --collective-timeout $T
wait_until '[ "$(steps_logged linkdown/r0.out)" -ge 3 ]' 60 ||
  { cat linkdown/*.err linkdown/mpirun.txt; fail "train_gpt did not get going on 2 hosts"; }
t_down=$(now)
ip link set "$(cluster_veth 1)" down
wait_until '[ -f linkdown/r0.exit ] && [ -f linkdown/r1.exit ]' $((T + margin + 10)) ||
  { cat linkdown/*.err; fail "a rank still ran $((T + margin + 10)) s after the link went down (hang)"; }
for r in 0 1; do
  read -r rc t_exit <"linkdown/r$r.exit"
  took=$(elapsed "$t_down" "$t_exit")
  msg=$(grep -m1 "timed out" "linkdown/r$r.err" || true)
  log "   rank $r ($([ $r = 0 ] && echo strata-h0 || echo strata-h1)): exit $rc after ${took} s: ${msg:-$(cat "linkdown/r$r.err")}"
  [ "$rc" = 1 ] || fail "rank $r ended with status $rc, not 1 (strata's error exit)"
  le "$took" $((T + margin)) || fail "rank $r took ${took} s after the link went down (timeout $T s + margin $margin s)"
  peer=$((1 - r))
  # The op, its number and the group; then the peer, as missing (it had not announced the
  # op when the link went down), as the one this rank's transfers were stuck on, or as the one
  # that did not answer the roll call (the side channel crosses the dead link too).
  [[ "$msg" =~ \[rank\ $r\]\ [a-z_]+\ \#[0-9]+\ \([^\)]*\)\ in\ group\ \'world\':\ timed\ out\ after\ ${T}000\ ms\;\ (ranks\ $peer\ of\ 2\ had\ not\ reached\ it|every\ rank\ had\ entered\ it,\ but\ (this\ rank\'s\ transfers\ with\ ranks\ $peer\ had\ not\ completed|ranks\ $peer\ of\ 2\ did\ not\ answer\ within\ [0-9]+\ ms)) ]] ||
    fail "rank $r's error does not name the op, its number, group 'world' and rank $peer: $(cat "linkdown/r$r.err")"
done
wait_mpirun 25 || fail "mpirun still ran 25 s after both ranks had failed (tcp_retries2=4 on strata-h0)"
[ "$mpirun_rc" != 0 ] || fail "mpirun exited 0 although both ranks failed"
log "   mpirun: exit $mpirun_rc after $(elapsed "$t_down" "$(now)") s: $(grep -m1 -E '^(mpirun|ORTE|Primary job)' linkdown/mpirun.txt || true)"
reset_hosts

# --- 2. packet loss -------------------------------------------------------------------------
log "2. packet loss: 2% dropped each way on strata-h1's link; same seed, same losses and weights"
lossy_train=("${train[@]}" --steps 40 --warmup 4 --log-every 1 --collective-timeout 120)
run_to_end() {  # NAME: the 40 steps, saved at the end, the model exported
  local t0; t0=$(now)
  launch "$1" -- "${lossy_train[@]}" --save "$out/$1/ckpt"
  wait_mpirun 120 || fail "$1: train_gpt still ran after 120 s"
  [ "$mpirun_rc" = 0 ] || { cat "$1"/*.err "$1/mpirun.txt"; fail "$1: train_gpt failed (mpirun status $mpirun_rc)"; }
  "$ckpt_tool" export "$out/$1/ckpt" --out "$out/$1/hf" >/dev/null || fail "$1: strata-ckpt export failed"
  grep -oE '^step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1/r0.out" >"$1/losses.txt"
  [ "$(wc -l <"$1/losses.txt")" = 40 ] || fail "$1: expected 40 logged losses, got $(wc -l <"$1/losses.txt")"
  log "   $1: 40 steps in $(elapsed "$t0" "$(now)") s"
}
run_to_end clean
"$here/host_exec.sh" strata-h1 nft -f - <<'EOF'
table inet strata_faults {
  chain in  { type filter hook input priority 0; iifname "eth0" numgen random mod 100 < 2 counter drop; }
  chain out { type filter hook output priority 0; oifname "eth0" numgen random mod 100 < 2 counter drop; }
}
EOF
if [ "$netem" = 1 ]; then
  "$here/host_exec.sh" strata-h1 "$here/shape_link.sh" eth0 "" 1ms
  log "   and 1 ms of delay on what strata-h1 sends (tc netem)"
else
  log "   NOTICE: no delay tested: this kernel lacks sch_netem (tc netem), and nftables cannot delay packets"
fi
# The reachability checks (cluster_mpirun.sh, rsh_agent.sh) connect through the lossy link
# too: a dropped SYN or RST is resent after 1 s, then 3 s and 7 s from the start, so 2 s
# gives one resend and a 1-in-600 chance (two of the ~4% losses in a row) of calling
# strata-h1 unreachable, as one CI run did. 8 s covers three resends (about 1 in 400000).
export STRATA_CLUSTER_REACH_TIMEOUT=8
run_to_end lossy
unset STRATA_CLUSTER_REACH_TIMEOUT
dropped=$("$here/host_exec.sh" strata-h1 nft list table inet strata_faults | grep -oE 'packets [0-9]+' | awk '{n += $2} END {print n + 0}')
log "   $dropped packets dropped on strata-h1's link"
[ "$dropped" -gt 0 ] || fail "no packet was dropped: the loss rules did not act on the ranks' traffic"
diff clean/losses.txt lossy/losses.txt >/dev/null || { diff clean/losses.txt lossy/losses.txt; fail "the losses differ with packet loss"; }
cmp clean/hf/model.safetensors lossy/hf/model.safetensors || fail "the final models differ with packet loss"
log "   40 losses identical digit for digit; final model identical byte for byte ($(stat -c %s clean/hf/model.safetensors) bytes)"
reset_hosts

# --- 3. a host killed while checkpoints are saved ------------------------------------------
log "3. host killed: SIGKILL to every process on strata-h1 while train_gpt saves every 3 steps"
ck=$out/killed/ckpt
launch killed -- "${train[@]}" --steps 100000 --log-every 1 --save "$ck" --save-every 3 --collective-timeout 5
latest_step() { sed -nE 's/^step-([0-9]+)-.*/\1/p' "$ck/latest" 2>/dev/null; }
wait_until '[ "$(latest_step)" ] && [ "$(latest_step)" -ge 6 ]' 60 ||
  { cat killed/*.err killed/mpirun.txt; fail "no checkpoint of step 6 or later after 60 s"; }
victims=$(cluster_host_procs strata-h1 | tr '\n' ' ')
# shellcheck disable=SC2086  # one pid per word
kill -KILL $victims
t_kill=$(now)
log "   killed pids $victims(strata-h1) after the save of step $(latest_step)"
wait_mpirun 20 || fail "mpirun still ran 20 s after strata-h1's processes were killed"
log "   mpirun: exit $mpirun_rc after $(elapsed "$t_kill" "$(now)") s: $(grep -m1 -E '^(mpirun|ORTE|Primary job)' killed/mpirun.txt || true)"
wait_until '[ -z "$(cluster_host_procs strata-h0)" ]' 10 || fail "processes on strata-h0 outlived mpirun"
newest=$(cat "$ck/latest")
"$ckpt_tool" verify "$ck" >killed/verify.txt 2>&1 || { cat killed/verify.txt; fail "strata-ckpt verify failed on $newest"; }
log "   $newest: $(tail -n1 killed/verify.txt)"
step=$(latest_step)
STRATA_CLUSTER_SLOTS=2 "$here/cluster_mpirun.sh" -np 1 --host strata-h0:1 "${train[@]}" --steps 100000 \
  --stop-at $((step + 3)) --global-batch 16 --log-every 1 --resume "$ck" >killed/resume.txt 2>&1 ||
  { cat killed/resume.txt; fail "resuming from $newest on strata-h0 failed"; }
if ! grep -q "^resumed from $ck at step $step\$" killed/resume.txt ||
   ! grep -qE "^step +$((step + 3))/100000 " killed/resume.txt; then
  cat killed/resume.txt; fail "the resume did not continue from step $step to step $((step + 3))"
fi
log "   resumed on strata-h0 alone from step $step and trained to step $((step + 3))"
reset_hosts

# --- 4. an unreachable host ------------------------------------------------------------------
log "4. bad host: strata-h1's link down, then a host name that is not in the cluster"
ip link set "$(cluster_veth 1)" down
t0=$SECONDS
if timeout 30 "$here/cluster_mpirun.sh" -np 2 hostname >badhost.txt 2>&1; then fail "mpirun ran with strata-h1 unreachable"; fi
cat badhost.txt
grep -q "host strata-h1 of .* is unreachable from strata-h0" badhost.txt || fail "the error does not name strata-h1 as unreachable"
[ $((SECONDS - t0)) -le 5 ] || fail "the unreachable host took $((SECONDS - t0)) s to report"
# Past the pre-check (mpirun run by hand with the agent), the agent refuses like ssh.
rc=0; "$here/host_exec.sh" strata-h0 "$here/rsh_agent.sh" strata-h1 true >agent.txt 2>&1 || rc=$?
cat agent.txt
if [ "$rc" != 255 ] || ! grep -q "cannot connect to host strata-h1 from strata-h0" agent.txt; then
  fail "rsh_agent.sh did not refuse the unreachable strata-h1 with ssh's status 255 (status $rc)"
fi
ip link set "$(cluster_veth 1)" up
t0=$SECONDS
if timeout 30 "$here/cluster_mpirun.sh" -np 2 --host strata-h0:1,strata-h7:1 hostname >badname.txt 2>&1; then
  fail "mpirun ran on a host that does not exist"
fi
grep -m1 strata-h7 badname.txt || { cat badname.txt; fail "the error does not name strata-h7"; }
[ $((SECONDS - t0)) -le 5 ] || fail "the unknown host took $((SECONDS - t0)) s to report"
log "PASSED"
