#!/usr/bin/env bash
# Stops what start_single_node.sh started.
scontrol shutdown >/dev/null 2>&1 || true
for _ in $(seq 1 50); do pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break; sleep 0.1; done
pkill -x slurmd 2>/dev/null || true
pkill -x slurmctld 2>/dev/null || true
pkill -u munge -x munged 2>/dev/null || true
exit 0
