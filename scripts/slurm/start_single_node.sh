#!/usr/bin/env bash
# Starts a single-node Slurm (munge + slurmctld + slurmd) by hand, as root, without systemd: for
# tests and for trying the batch scripts on one machine. Stop it with stop_single_node.sh.
# Configuration: MpiDefault=pmix (Debian's Open MPI has no PMI-2), select/cons_tres,
# proctrack/linuxproc and task/none (no cgroups needed).
set -euo pipefail
NCPUS=${SLURM_CI_CPUS:-$(nproc)}
command -v slurmctld >/dev/null || { echo "slurm-wlm is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
[ -s /etc/munge/munge.key ] || {
  /usr/sbin/mungekey --create --force 2>/dev/null || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
}
install -d -o munge -g munge -m 0755 /run/munge
munge -n >/dev/null 2>&1 || runuser -u munge -- /usr/sbin/munged
install -d -m 0755 /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
cat >/etc/slurm/slurm.conf <<CONF
ClusterName=mapfuse
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=pmix
ReturnToService=2
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs=${NCPUS} RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -c
slurmd -N localhost
for _ in $(seq 1 150); do
  sinfo -h -o '%T' 2>/dev/null | grep -qx idle && exit 0
  sleep 0.2
done
echo "slurm did not come up" >&2
tail -20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
