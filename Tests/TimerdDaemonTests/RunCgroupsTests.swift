import Dispatch
import Glibc
import Testing
import TimerdCore
import TimerdSystem
@testable import TimerdDaemon

/// `RunCgroups`' bookkeeping of jobs' cgroups, on a plain directory standing in for `runs/` (mkdir and
/// rmdir behave there as in a cgroup v2 hierarchy for empty cgroups). The kernel's side (clone3 into a
/// reused cgroup, what a run used) is SystemdTests' "each run has a cgroup".
@Suite struct RunCgroupsTests {
    let directory: String
    let queue = DispatchQueue(label: "test.runs")

    init() throws {
        var template = Array("/tmp/timerd-runcgroups.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TimerdError(.internal, "mkdtemp failed") }
        directory = String(cString: made)
        mkdir(directory + "/runs", 0o755)
    }

    private func cgroups(linger: Duration = .seconds(30)) throws -> RunCgroups {
        let tree = RunCgroupTree(own: CgroupDirectory(path: directory), runs: CgroupDirectory(path: directory + "/runs"))
        return RunCgroups(tree: tree, events: try CgroupEvents(queue: queue), queue: queue, linger: linger)
    }

    private func removeAll() {
        for name in (try? FileSystem.glob(directory + "/runs/*")) ?? [] { rmdir(name) }
        rmdir(directory + "/runs")
        rmdir(directory)
    }

    private func exists(_ name: String) -> Bool { FileSystem.isDirectory(directory + "/runs/" + name) }

    /// A cgroup for a run of `job`, taken on the runs' queue (its directory, opened for a spawn, closed).
    private func take(_ runs: RunCgroups, _ job: String) throws -> RunCgroup {
        try queue.sync { () throws -> RunCgroup in
            let (cgroup, handle) = try runs.take(job: job, limits: [])
            try handle.close()
            return cgroup
        }
    }

    /// Waits (up to 10 s) for `condition`, checked every 10 ms.
    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .seconds(10)
        while DispatchTime.now() < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    @Test func aJobsNextRunTakesTheCgroupItsLastRunLeftAndRunsAtOnceEachHaveOne() throws {
        defer { removeAll() }
        let runs = try cgroups()
        let first = try take(runs, "a")
        #expect(first.slot == 1 && first.directory.path == directory + "/runs/a@1" && exists("a@1"))
        // While the first runs, a second run of the job gets a cgroup of its own; another job has its own names.
        let second = try take(runs, "a")
        let other = try take(runs, "b")
        #expect(second.slot == 2 && exists("a@2") && other.slot == 1 && exists("b@1"))
        // The first ends (empty): the next run takes it, with the counters it ended with as its start.
        let counters = RunCgroupCounters(cpu: .milliseconds(300), ioRead: 1, ioWritten: 2, oomKills: 0)
        queue.sync { runs.keep(first, counters: counters) }
        #expect(runs.cgroups(of: "a").idle == [1])
        let third = try take(runs, "a")
        #expect(third.slot == 1 && third.before == counters)
        #expect(runs.cgroups(of: "a").idle.isEmpty && runs.cgroups(of: "a").slots == [1, 2])
        // One that may hold what its run left is removed, and its name is free once it is gone.
        queue.sync { runs.release(second) }
        #expect(eventually { !exists("a@2") && runs.cgroups(of: "a").slots == [1] })
        let fourth = try take(runs, "a")
        #expect(fourth.slot == 2 && exists("a@2"))
        for cgroup in [third, fourth, other] { queue.sync { runs.release(cgroup) } }
        #expect(eventually { runs.cgroups(of: "a").slots.isEmpty && runs.cgroups(of: "b").slots.isEmpty })
    }

    @Test func aCgroupMadeWithOtherLimitsIsNotReused() {
        func idle(_ slot: Int, _ limits: [String]) -> RunCgroup {
            RunCgroup(job: "a", slot: slot, directory: CgroupDirectory(path: "/runs/a@\(slot)"), limits: limits)
        }
        var job = RunCgroups.Job(idle: [idle(1, ["pids.max=2"]), idle(3, [])], slots: [1, 2, 3])
        // The job was replaced without its limit: the idle one without limits, and the other is of no more use.
        let (found, slot, stale) = job.claim(limits: [])
        #expect(found?.slot == 3 && slot == 3 && stale.map(\.slot) == [1] && job.idle.isEmpty)
        // Nothing idle: the lowest slot no cgroup of the job has (1 is still there until it is removed).
        let next = job.claim(limits: ["pids.max=2"])
        #expect(next.found == nil && next.slot == 4 && job.slots == [1, 2, 3, 4])
    }

    @Test func idleCgroupsGoAfterTheLinger() throws {
        defer { removeAll() }
        let runs = try cgroups(linger: .milliseconds(200))
        let first = try take(runs, "a")
        queue.sync { runs.keep(first, counters: RunCgroupCounters()) }
        #expect(exists("a@1") && runs.cgroups(of: "a").idle == [1])
        #expect(eventually { !exists("a@1") && runs.cgroups(of: "a").slots.isEmpty })
        // Its name is free again.
        let again = try take(runs, "a")
        #expect(again.slot == 1 && exists("a@1"))
        queue.sync { runs.release(again) }
        #expect(eventually { !exists("a@1") })
    }

    @Test func whereCgroupsAreNotReusedEachRunGetsANewOne() throws {
        defer { removeAll() }
        var tree = RunCgroupTree(own: CgroupDirectory(path: directory), runs: CgroupDirectory(path: directory + "/runs"))
        tree.reusable = false
        let runs = RunCgroups(tree: tree, events: try CgroupEvents(queue: queue), queue: queue)
        let first = try take(runs, "a")
        queue.sync { runs.keep(first, counters: RunCgroupCounters()) }
        #expect(runs.cgroups(of: "a").idle.isEmpty)
        #expect(eventually { !exists("a@1") && runs.cgroups(of: "a").slots.isEmpty })
    }
}
