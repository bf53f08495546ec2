#!/usr/bin/env python3
"""Inclusive counts of chosen kernel frames among the samples whose callchain has
FILTER (e.g. __sys_sendto). Usage: frames.py FILE.data FILTER"""
import sys, subprocess, collections, re
f, filt = sys.argv[1], sys.argv[2]
out = subprocess.run(["perf", "script", "-i", f, "-F", "ip,sym,dso"], capture_output=True, text=True).stdout
FR = ["__sys_sendto", "__sys_sendmmsg", "ip_finish_output2", "__dev_queue_xmit", "veth_xmit", "do_softirq", "handle_softirqs", "net_rx_action", "process_backlog",
      "br_handle_frame", "br_forward", "br_dev_queue_push_xmit", "br_nf_pre_routing", "netif_rx", "__netif_rx",
      "ip_rcv", "nf_hook_slow", "nft_do_chain_inet", "ip_local_deliver", "udp_rcv", "__udp4_lib_rcv", "udp_queue_rcv_one_skb", "__udp_enqueue_schedule_skb",
      "sock_def_readable", "ep_poll_callback", "__wake_up_common", "try_to_wake_up", "ttwu_do_activate", "select_task_rq_fair", "enqueue_task_fair", "_raw_spin_unlock_irqrestore",
      "ip_route_output_flow", "ip_make_skb", "sock_alloc_send_pskb", "udp_send_skb", "__ip_make_skb", "neigh_resolve_output", "__local_bh_enable_ip", "raw_v4_input", "__napi_schedule", "napi_schedule", "veth_poll"]
n = 0; tot = 0; c = collections.Counter(); leaf = collections.Counter()
for b in out.split("\n\n"):
    syms = [m.group(1).split("+")[0] for m in re.finditer(r"[0-9a-f]+ (\S+) \(", b)]
    if not syms: continue
    tot += 1
    if not any(filt in s for s in syms): continue
    n += 1
    leaf[syms[0]] += 1
    for s in set(syms):
        if s in FR: c[s] += 1
print(f"{f}: {n} of {tot} samples have {filt}")
for s in FR:
    if c[s]: print(f"  {c[s]:6d} {100*c[s]/n:5.1f}%  {s}")
print("  leaves:", ", ".join(f"{k}:{v}" for k, v in leaf.most_common(15)))
