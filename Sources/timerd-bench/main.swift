import Foundation
import TimerdSystem

// timerd-bench: the benchmark program behind `make bench` (bench/run.sh). Each scenario starts its own
// timerd (a release build) on a socket in the output directory and drives it over the control socket.

let usage = """
    usage: timerd-bench run --timerd PATH [--probe PATH] --out DIR [--launcher PATH] [--seconds S] [--loads N,N] [--turns T]
                            [--scale-jobs N] [--throughput-jobs N] [--throughput-seconds S]
                            [--webhook-jobs N] [--nginx PATH] [--idle-seconds S]
                            [--cluster-loads NODES:RATE,…] [--cluster-seconds S] [--etcd PATH] [--only LIST]
           timerd-bench report --out DIR

    run      lateness (N jobs every second for S seconds, for each N in --loads, default 1000,200;
             S default 60; with --launcher, the bare C launcher of bench/launcher.c runs the same
             schedule at each load, as the floor, twice over (the floor against itself), the three
             taking turns: T windows of S/T s each, default 4), scale (--scale-jobs, default
             100000), throughput (--throughput-jobs each due every second, default 3000, for 20 s)
             and idle (default 60 s); --only picks some of lateness,scale,throughput,webhooks,idle,
             cluster; webhooks (--webhook-jobs each due every second, default 8000, to a local
             nginx given by --nginx); cluster (for each NODES:RATE of
             --cluster-loads, default 1:2000,3:3000: NODES timerd nodes on a real etcd on loopback,
             1 member for 1 node, else 3; --etcd default /usr/bin/etcd; sharing RATE webhook jobs
             each due every second, for --cluster-seconds, default 20; DIR/cluster-NODES.json).
             Results go to DIR/*.json. --probe (bench/probe.c,
             built) is needed by lateness and scale.
    report   DIR/report.md, CDF files and DIR/lateness.gp from the results (and peers' results) in DIR.
    dispatch-timers N, dispatch-idle [global]
             the bare Dispatch programs the scale and idle scenarios measure for comparison.

    """

var options: [String: String] = [:]
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "dispatch-timers", let count = arguments.dropFirst().first.flatMap({ Int($0) }) { dispatchTimers(count) }
if arguments.first == "dispatch-idle" { dispatchIdle(global: arguments.dropFirst().first == "global") }
guard let mode = arguments.first, ["run", "report"].contains(mode) else {
    CurrentProcess.writeToStderr(usage)
    exit(2)
}
arguments.removeFirst()
while let flag = arguments.first, flag.hasPrefix("--"), arguments.count >= 2 {
    options[String(flag.dropFirst(2))] = arguments[1]
    arguments.removeFirst(2)
}
guard arguments.isEmpty, let out = options["out"] else {
    CurrentProcess.writeToStderr(usage)
    exit(2)
}

@MainActor func number(_ key: String, _ fallback: Double) -> Double {
    guard let text = options[key] else { return fallback }
    guard let value = Double(text), value > 0 else {
        CurrentProcess.writeToStderr("timerd-bench: --\(key) needs a positive number, got \(text)\n")
        exit(2)
    }
    return value
}

do {
    if mode == "report" {
        try Report(out: out).write()
        exit(0)
    }
    let only = Set((options["only"] ?? "lateness,scale,throughput,webhooks,idle,cluster").split(separator: ",").map(String.init))
    // Only the lateness and scale scenarios run the probe.
    guard let timerd = options["timerd"], let probe = options["probe"] ?? (only.isDisjoint(with: ["lateness", "scale"]) ? "" : nil) else {
        CurrentProcess.writeToStderr(usage)
        exit(2)
    }
    let setup = Setup(timerd: timerd, probe: probe, out: out, launcher: options["launcher"])
    let seconds = number("seconds", 60)
    if only.contains("lateness") {
        let turns = Int(number("turns", 4))
        guard turns > 0 else { throw BenchError("--turns: at least 1") }
        for load in (options["loads"] ?? "1000,200").split(separator: ",") {
            guard let jobs = Int(load), jobs > 0 else { throw BenchError("--loads: not a job count: \(load)") }
            print("lateness: \(jobs) jobs every second for \(Int(seconds)) s\(setup.launcher == nil ? "" : ", taking \(turns) turns with the bare C launcher, twice over") …")
            let result = try runLateness(setup, jobs: jobs, seconds: seconds, turns: turns)
            try Measure.writeJSON(result.timerd, to: "\(out)/timerd-\(jobs).json")
            if let launcher = result.launcher { try Measure.writeJSON(launcher, to: "\(out)/launcher-\(jobs).json") }
            if let again = result.launcherAgain { try Measure.writeJSON(again, to: "\(out)/launcher2-\(jobs).json") }
        }
    }
    if only.contains("scale") {
        let jobs = Int(number("scale-jobs", 100_000))
        print("scale: \(jobs) jobs …")
        try Measure.writeJSON(try runScale(setup, jobs: jobs), to: "\(out)/scale.json")
    }
    if only.contains("throughput") {
        print("throughput …")
        try Measure.writeJSON(try runThroughput(setup, jobs: Int(number("throughput-jobs", 3_000)), seconds: number("throughput-seconds", 20)), to: "\(out)/throughput.json")
    }
    if only.contains("webhooks") {
        guard let nginx = options["nginx"] else { throw BenchError("webhooks: give --nginx PATH (Debian's nginx-light)") }
        print("webhooks …")
        try Measure.writeJSON(try runWebhookThroughput(
            setup, nginx: nginx, jobs: Int(number("webhook-jobs", 8_000)), seconds: number("throughput-seconds", 20)),
            to: "\(out)/webhooks.json")
    }
    if only.contains("idle") {
        print("idle …")
        try Measure.writeJSON(try runIdle(setup, seconds: number("idle-seconds", 60)), to: "\(out)/idle.json")
    }
    if only.contains("cluster") {
        let etcd = options["etcd"] ?? "/usr/bin/etcd"
        guard FileManager.default.isExecutableFile(atPath: etcd) else {
            throw BenchError("cluster: no etcd at \(etcd) (Debian's etcd-server; or give --etcd PATH)")
        }
        let clusterSeconds = number("cluster-seconds", 20)
        for load in (options["cluster-loads"] ?? "1:2000,3:3000").split(separator: ",") {
            let parts = load.split(separator: ":").map { Int($0) }
            guard parts.count == 2, let nodes = parts[0], let rate = parts[1], nodes > 0, rate > 0 else {
                throw BenchError("--cluster-loads: not NODES:RATE: \(load)")
            }
            print("cluster: \(nodes) node\(nodes == 1 ? "" : "s"), \(rate) shared webhook jobs every second for \(Int(clusterSeconds)) s …")
            try Measure.writeJSON(try runCluster(setup, etcd: etcd, nodes: nodes, jobs: rate, seconds: clusterSeconds), to: "\(out)/cluster-\(nodes).json")
        }
    }
} catch {
    CurrentProcess.writeToStderr("timerd-bench: \(error)\n")
    exit(1)
}
