package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTicks is the machine's CPU time so far, from the first line of
// /proc/stat (Linux), in clock ticks summed over its CPUs: all of it, the
// part idle (idle and waiting for I/O), and the part stolen (time the
// hypervisor gave to other machines while this one had work to run). Its
// zero value is "unknown".
type cpuTicks struct {
	total, idle, steal uint64
	ok                 bool
}

func readCPU() cpuTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPU(line)
}

// parseCPU reads the line "cpu user nice system idle iowait irq softirq
// steal guest guest_nice". Guest time is already counted in user and
// nice, so it is left out of the total; a kernel too old to report steal
// leaves the line unknown.
func parseCPU(line string) cpuTicks {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var v [8]uint64
	for i := range v {
		x, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return cpuTicks{}
		}
		v[i] = x
	}
	t := cpuTicks{idle: v[3] + v[4], steal: v[7], ok: true}
	for _, x := range v {
		t.total += x
	}
	return t
}

// shares is what the machine's CPUs did between a and b: busy, the share of
// their time spent running anything (this run's systems and clients among
// it), and stolen, the share the hypervisor gave to other machines. Both
// are -1 when unknown.
func shares(a, b cpuTicks) (busy, stolen float64) {
	if !a.ok || !b.ok || b.total <= a.total || b.idle < a.idle || b.steal < a.steal {
		return -1, -1
	}
	all := float64(b.total - a.total)
	idle, steal := float64(b.idle-a.idle), float64(b.steal-a.steal)
	return (all - idle - steal) / all, steal / all
}

// percent writes a share as a percentage to a tenth, "-" when unknown.
func percent(x float64) string {
	if x < 0 {
		return "-"
	}
	return strconv.FormatFloat(100*x, 'f', 1, 64)
}

// clockTick is the unit of the CPU times in /proc: USER_HZ, which Linux
// fixes at 100 for what it shows to programs, whatever the kernel's own
// tick.
const clockTick = 10 * time.Millisecond

// processCPU is the CPU time, user and system, that process pid has used
// so far, from /proc/<pid>/stat (Linux); false when unknown.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcessCPU(string(b))
}

// parseProcessCPU reads utime and stime, the 14th and 15th fields of a
// /proc/<pid>/stat line. The second field, the command's name in
// parentheses, may itself hold spaces and parentheses, so the fields are
// counted from the last ")".
func parseProcessCPU(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is the 3rd field (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}

// procStat is what a /proc/<pid>/stat line says of a process's CPU: its
// parent, its own user and system time, and that of its children it has
// waited for (cutime and cstime, fields 16 and 17).
type procStat struct {
	ppid           int
	self, children time.Duration
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseProcStat(string(b))
}

func parseProcStat(stat string) (procStat, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return procStat{}, false
	}
	var v [5]uint64 // ppid; utime, stime, cutime, cstime
	for j, k := range []int{1, 11, 12, 13, 14} {
		x, err := strconv.ParseUint(f[k], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		v[j] = x
	}
	return procStat{ppid: int(v[0]), self: time.Duration(v[1]+v[2]) * clockTick, children: time.Duration(v[3]+v[4]) * clockTick}, true
}

// treeCPU is the CPU time of process pid and of its direct children: its
// own, its children's it has waited for (a PostgreSQL backend that ended),
// and its live children's own (the backends and the background writers).
// A child that ends and is waited for between the reading of the parent
// and the scan of its children would be in neither: the parent is read
// again after the scan, and the scan made again if its children's time
// moved meanwhile.
func treeCPU(pid int) (time.Duration, bool) {
	for range 5 {
		root, ok := readProcStat(pid)
		if !ok {
			return 0, false
		}
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return 0, false
		}
		sum := root.self + root.children
		for _, e := range entries {
			child, err := strconv.Atoi(e.Name())
			if err != nil || child == pid {
				continue
			}
			if s, ok := readProcStat(child); ok && s.ppid == pid {
				sum += s.self
			}
		}
		if again, ok := readProcStat(pid); ok && again.children == root.children {
			return sum, true
		}
	}
	return 0, false
}

// postmaster is the pid of the postmaster of the cluster in dataDir: the
// first line of its postmaster.pid, if that process is the postgres
// running on dataDir (-D, the same folder, symbolic links resolved); 0
// otherwise. Checked at every reading: a pid can be reused.
func postmaster(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return 0
	}
	want, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return 0
	}
	argv := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	for i, a := range argv[:max(len(argv)-1, 0)] {
		if a != "-D" {
			continue
		}
		if got, err := filepath.EvalSymlinks(argv[i+1]); err == nil && got == want {
			return pid
		}
	}
	return 0
}
