import Dispatch
import Glibc
import TimerdCore
import TimerdSystem

/// The cgroups runs start in (`docs/architecture.md`, "Runs"): timerd's own cgroup v2, with timerd itself
/// moved into its leaf `supervisor` and each run in `runs/JOB@N` (`RunCgroups`), created there by clone3
/// (`CLONE_INTO_CGROUP`), so everything a run starts, whatever session or process group it makes,
/// stays in the run's cgroup, and `cgroup.kill` ends it all. systemd runs a service in a cgroup of its
/// own that it hands over with `Delegate=yes` (`timerd.service`).
struct RunCgroupTree: Sendable {
    /// timerd's own cgroup.
    let own: CgroupDirectory
    /// Where runs' cgroups go.
    let runs: CgroupDirectory
    /// The controllers each run's cgroup has (enabled down to `runs/`): those of `memory`, `cpu`, `io` and
    /// `pids` that timerd's own cgroup was given.
    var controllers: Set<String> = []
    /// Whether a run's cgroup can be kept for its job's next run (`RunCgroups`): what a run used must be
    /// its own, and a cgroup's `memory.peak` can be reset for one reader only since Linux 6.12, so with the
    /// memory controller only where `runs/`'s can be.
    var reusable = true

    /// The controllers run limits use (`ResourceSettings.cgroupKeys`).
    static let wanted = ["cpu", "io", "memory", "pids"]

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
        var tree = RunCgroupTree(own: own, runs: runs)
        tree.controllers = enableControllers(own: own, runs: runs)
        if tree.controllers.contains("memory") {
            let peak = try? runs.openResetPeak()
            tree.reusable = peak != nil
            try? peak?.close()
        }
        return .success(tree)
    }

    /// Enables in `own` and then `runs` (their `cgroup.subtree_control`) the wanted controllers `own` has,
    /// each on its own, so one the kernel refuses (a controller in threaded mode, one busy elsewhere) does
    /// not keep the others out. Returns those enabled in both. Needs timerd out of `own` (in `supervisor`):
    /// a cgroup with processes cannot pass controllers down.
    private static func enableControllers(own: CgroupDirectory, runs: CgroupDirectory) -> Set<String> {
        let available = Set(((try? own.lines("cgroup.controllers")) ?? []).flatMap { $0.split(separator: " ").map(String.init) })
        var enabled: Set<String> = []
        for controller in wanted where available.contains(controller) {
            guard (try? own.write("cgroup.subtree_control", "+" + controller)) != nil,
                  (try? runs.write("cgroup.subtree_control", "+" + controller)) != nil else { continue }
            enabled.insert(controller)
        }
        return enabled
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

/// What runs may be given on this host (`docs/configuration.md`, "Resource control"), for the checks of an
/// `ADD`, of the config, and of a user's settings against timerd's own.
struct RunResourceSupport: Sendable {
    /// The controllers each run's cgroup has.
    let controllers: Set<String>
    /// Why runs have no cgroup here (nil when they have one), and timerd's own cgroup.
    let noCgroup: String?
    let own: String?

    init(_ cgroups: Result<RunCgroupTree, RunCgroupTree.Unavailable>) {
        switch cgroups {
        case .success(let tree):
            controllers = tree.controllers
            noCgroup = nil
            own = tree.own.path
        case .failure(let unavailable):
            controllers = []
            noCgroup = unavailable.description
            own = nil
        }
    }

    init(controllers: Set<String>, noCgroup: String? = nil, own: String? = nil) {
        self.controllers = controllers
        self.noCgroup = noCgroup
        self.own = own
    }

    /// The first setting of `settings` a run cannot have here, as `bad-argument` naming its key and what is
    /// missing; nil when every one can be given.
    func problem(_ settings: ResourceSettings, as key: (String) -> String = { $0 }) -> TimerdError? {
        for (name, controller) in settings.cgroupSettings where !controllers.contains(controller) {
            let shown = key(name)
            if let noCgroup {
                return TimerdError(
                    .badArgument, "\(shown) needs a cgroup for each run, and runs have none here: \(noCgroup)", key: shown)
            }
            let have = controllers.isEmpty ? "none of cpu, io, memory and pids" : controllers.sorted().joined(separator: ", ")
            return TimerdError(
                .badArgument,
                "\(shown) needs the \(controller) controller, which timerd's cgroup \(own ?? "?") was not given (it has \(have); "
                    + "under systemd, Delegate=yes hands over those the kernel has on cgroup v2)", key: shown)
        }
        return nil
    }
}
