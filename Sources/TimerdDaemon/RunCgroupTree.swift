import Dispatch
import Glibc
import TimerdSystem

/// The cgroups runs start in (`docs/architecture.md`, "Runs"): timerd's own cgroup v2, with timerd itself
/// moved into its leaf `supervisor` and each run in `runs/JOB-RUN`, created there by clone3
/// (`CLONE_INTO_CGROUP`), so everything a run starts, whatever session or process group it makes,
/// stays in the run's cgroup, and `cgroup.kill` ends it all. systemd runs a service in a cgroup of its
/// own that it hands over with `Delegate=yes` (`timerd.service`).
struct RunCgroupTree: Sendable {
    /// timerd's own cgroup.
    let own: CgroupDirectory
    /// Where runs' cgroups go.
    let runs: CgroupDirectory

    /// Why runs cannot have cgroups here (they are then tracked by process group).
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// Moves timerd into `supervisor` and makes `runs`, in timerd's own cgroup, unless that cgroup is not
    /// timerd's to use: none (no cgroup v2 mounted), the hierarchy's root (shared with the whole machine),
    /// one without `cgroup.kill` (Linux before 5.14), one holding other processes, or one timerd may not
    /// write (under systemd without `Delegate=yes`).
    static func setUp() -> Result<RunCgroupTree, Unavailable> {
        let (found, path) = CgroupHierarchy.own()
        guard let own = found, let path else { return .failure(Unavailable(description: "no cgroup v2 hierarchy is mounted")) }
        if path == "/" {
            return .failure(Unavailable(description: "timerd is in the root cgroup (\(own)), which it does not own"))
        }
        guard own.has("cgroup.kill") else {
            return .failure(Unavailable(description: "\(own) has no cgroup.kill (Linux 5.14 or later has it)"))
        }
        let me = getpid()
        let others = ((try? own.processes()) ?? []).filter { $0 != me }
        guard others.isEmpty else {
            let listed = others.prefix(3).map(String.init).joined(separator: ", ")
            return .failure(Unavailable(description: "\(own) holds other processes too (\(listed)\(others.count > 3 ? ", …" : "")): it is not timerd's own"))
        }
        let supervisor = own.child("supervisor"), runs = own.child("runs")
        do {
            for directory in [supervisor, runs] where !directory.exists { try directory.create() }
            try supervisor.move(me)
        } catch {
            return .failure(Unavailable(description: "cannot use \(own): \(error) (under systemd, timerd.service needs Delegate=yes)"))
        }
        return .success(RunCgroupTree(own: own, runs: runs))
    }

    /// What an earlier timerd left in `runs` (it stopped without ending its runs, and nothing killed
    /// them): killed, and the cgroups removed once empty. Returns a line for each cgroup that held processes.
    func sweep() -> [String] {
        var said: [String] = []
        for leftover in runs.descendants() {
            if (try? leftover.isPopulated()) == true {
                let count = ((try? leftover.processes()) ?? []).count
                try? leftover.kill()
                said.append("killed the \(count) process(es) an earlier timerd left in \(leftover)")
            }
        }
        for leftover in runs.descendants() { try? leftover.remove() }
        return said
    }
}
