#!/usr/bin/env python3
"""Sharded decoding as a Slurm job array on a real single-node cluster.

usage: slurm_test.py PTREC PTDECODE JAVA_BIN_DIR SAMPLES_DIR SCALE_DIR WORKDIR

Records `java Branchy 60` under emulation, starts a cluster of this machine
(scale/cluster.sh: munged, slurmctld, slurmd; needs root and Debian's slurm-wlm and
munge), and runs scale/submit.sh: a job array of 4 shards (whole threads, the default) reading the
trace from its directory, and the merge job after them (--dependency=afterok). The
merged cct-json must be the one `ptdecode export` writes. A cluster that cannot run (not
root, Slurm or munge not installed, daemons that do not come up) fails the test under
CI=true and skips it, saying why, elsewhere. Then a trace that does not
exist: the shards fail, the merge is cancelled, submit.sh fails and no profile is
written. The cluster is stopped at the end whatever happened, and its daemons must be
gone.
"""
import os
import random
import shutil
import subprocess
import sys
import time


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, IndexError):
        return False


def cannot_run(why):
    """CI must run the array (setup.sh installs Slurm and munge, CI runs as root)"""
    if os.environ.get('CI', '').lower() in ('true', '1', 'yes'):
        print('FAIL: %s (CI=true: the job array must run)' % why)
        return 1
    print('SKIP: %s' % why)
    return 77


def main():
    ptrec, ptdecode, jbin, samples, scale, work = sys.argv[1:7]
    if os.geteuid() != 0:
        return cannot_run('scale/cluster.sh runs the Slurm daemons as root')
    missing = [t for t in ('munged', 'slurmctld', 'slurmd', 'sbatch', 'scontrol', 'sinfo')
               if not shutil.which(t)]
    if missing:
        return cannot_run('%s not installed (Debian packages slurm-wlm and munge; setup.sh '
                          'installs them)' % ', '.join(missing))
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    classes = os.path.join(work, 'classes')
    subprocess.run([os.path.join(jbin, 'javac'), '--release', '17', '-d', classes,
                    os.path.join(samples, 'Branchy.java')], check=True)
    trace = os.path.join(os.path.abspath(work), 'branchy.trace')
    r = run([ptrec, '--emulate', '-o', trace, '--', os.path.join(jbin, 'java'), '-cp', classes,
             'Branchy', '60'], timeout=1800)
    if r.returncode:
        print('FAIL: recording: %s' % r.stderr[-2000:])
        return 1
    single = os.path.join(work, 'single.json')
    r = run([ptdecode, 'export', trace, '--format', 'cct-json', '-o', single], timeout=1800)
    if r.returncode:
        print('FAIL: export: %s' % r.stderr[-2000:])
        return 1

    cluster = os.path.join(os.path.abspath(work), 'cluster')
    env = dict(os.environ, PTDECODE=os.path.abspath(ptdecode),
               JPT_SLURM_PORT=str(random.Random(os.getpid()).randrange(20000, 30000, 2)),
               SLURM_CONF=os.path.join(cluster, 'slurm.conf'))
    ok = True
    pids = []
    try:
        r = run([os.path.join(scale, 'cluster.sh'), 'start', cluster], env=env, timeout=120)
        print(r.stdout + r.stderr)
        if r.returncode:
            return cannot_run('the one-node Slurm cluster did not start (log above)')
        for f in ('munged', 'slurmctld', 'slurmd'):
            with open(os.path.join(cluster, f + '.pid')) as fp:
                pids.append(int(fp.read()))
        parts = os.path.join(work, 'parts')
        out = os.path.join(work, 'merged.json')
        t0 = time.time()
        r = run([os.path.join(scale, 'submit.sh'), '--wait', trace, '4', parts, out,
                 '--whole-threads'], env=env, timeout=900)
        print(r.stdout + r.stderr)
        print('array and merge: %.0f s' % (time.time() - t0))
        logs = sorted(os.listdir(parts)) if os.path.isdir(parts) else []
        print('job outputs: %s' % ', '.join(logs))
        got = [f for f in logs if f.startswith('part-')]
        if r.returncode or len(got) != 4:
            print('FAIL: submit.sh %d, parts %s' % (r.returncode, got))
            ok = False
        elif not os.path.exists(out):
            print('FAIL: no merged profile')
            ok = False
        else:
            with open(out, 'rb') as a, open(single, 'rb') as b:
                if a.read() != b.read():
                    print('FAIL: the merged profile is not the single-process one')
                    ok = False
                else:
                    print('merged profile: identical to ptdecode export')

        bad_out = os.path.join(work, 'nothing.json')
        r = run([os.path.join(scale, 'submit.sh'), '--wait', os.path.join(work, 'none.trace'),
                 '2', os.path.join(work, 'bad-parts'), bad_out], env=env, timeout=900)
        print(r.stdout + r.stderr)
        if r.returncode == 0 or os.path.exists(bad_out):
            print('FAIL: shards of a missing trace: submit.sh %d, %s' %
                  (r.returncode, 'a profile was written' if os.path.exists(bad_out) else ''))
            ok = False
        else:
            print('shards of a missing trace: the merge was cancelled')
    finally:
        r = run([os.path.join(scale, 'cluster.sh'), 'stop', cluster], env=env, timeout=120)
        print(r.stdout + r.stderr)
    left = [p for p in pids if alive(p)]
    if left:
        print('FAIL: daemons still running after stop: %s' % left)
        ok = False
    print('PASS' if ok else 'FAIL')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
