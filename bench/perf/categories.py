#!/usr/bin/env python3
"""Sorts the samples of `perf record -g` of one process by where they fell: user code,
or the kernel by system call, with the network receive run in softirq (here: the
receiver's path, charged to the sender) apart. Usage: categories.py FILE.data [-v]"""
import sys, subprocess, collections, re
f = sys.argv[1]
out = subprocess.run(["perf", "script", "-i", f, "-F", "ip,sym,dso"], capture_output=True, text=True).stdout
samples = [b for b in out.split("\n\n") if b.strip()]
cat = collections.Counter(); leaf_user = collections.Counter(); sub = collections.Counter()
def syscall_of(frames):
    for s, d in reversed(frames):  # outermost first
        m = re.match(r"(?:__x64_sys_|__do_sys_|__se_sys_|__sys_)(\w+)", s)
        if m: return m.group(1)
    return None
RX = ("net_rx_action", "__netif_receive_skb", "process_backlog", "br_handle_frame", "ip_rcv", "napi_threaded_poll", "__napi_poll")
for b in samples:
    frames = []
    for l in b.strip().splitlines():
        l = l.strip()
        m = re.match(r"[0-9a-f]+ (.*) \((.*)\)$", l)
        if m: frames.append((m.group(1).split("+")[0], m.group(2)))
    if not frames: continue
    leaf_sym, leaf_dso = frames[0]
    if "kernel" not in leaf_dso:
        c = "user"
        leaf_user[(leaf_sym if leaf_sym != "[unknown]" else "?")[:60] + " (" + leaf_dso.split("/")[-1] + ")"] += 1
    else:
        syms = [s for s, d in frames]
        sc = syscall_of(frames)
        if any(s in RX for s in syms) or any("do_softirq" in s or "handle_softirqs" in s for s in syms):
            c = f"kernel: softirq net receive (in {sc or 'irq'})"
        elif any(s.startswith("asm_sysvec") or s.startswith("asm_common_interrupt") for s in syms) and sc is None:
            c = "kernel: interrupt at user level"
        elif any(s in ("__schedule", "finish_task_switch.isra.0", "schedule") for s in syms):
            c = f"kernel: schedule/switch (in {sc or 'exit to user'})"
        elif any("page_fault" in s or "exc_page_fault" in s for s in syms):
            c = "kernel: page fault"
        elif sc:
            c = f"kernel: syscall {sc}"
        elif any("syscall" in s or "entry_SYSCALL" in s for s in syms):
            c = "kernel: syscall entry/exit"
        else:
            c = "kernel: other (" + leaf_sym + ")"
        sub[(c, leaf_sym)] += 1
    cat[c] += 1
n = sum(cat.values())
print(f"{f}: {n} samples")
for c, k in cat.most_common():
    print(f"  {100*k/n:5.1f}%  {k:6d}  {c}")
print("  top user leaves:")
for c, k in leaf_user.most_common(12):
    print(f"    {100*k/n:5.1f}%  {c}")
if "-v" in sys.argv:
    print("  top kernel leaves per category:")
    for (c, s), k in sub.most_common(40):
        print(f"    {100*k/n:5.1f}%  {c} :: {s}")
