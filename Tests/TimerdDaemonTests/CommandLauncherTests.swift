import Testing
@testable import TimerdDaemon

@Suite struct CommandLauncherTests {
    @Test func aJobsRunsKeepOneQueueAndJobsSpreadOverAll() {
        let count = 4
        let names = (0..<200).map { "job-\($0)" }
        let first = names.map { CommandLauncher.queueIndex(of: $0, count: count) }
        // The same job, asked again, lands on the same queue: its runs start in the order asked for.
        #expect(names.map { CommandLauncher.queueIndex(of: $0, count: count) } == first)
        #expect(first.allSatisfy { (0..<count).contains($0) })
        // 200 jobs use every queue, none of them for more than half of the jobs.
        let perQueue = Dictionary(grouping: first, by: { $0 }).mapValues(\.count)
        #expect(perQueue.count == count)
        #expect(perQueue.values.allSatisfy { $0 < 100 }, "\(perQueue)")
    }

    @Test func atLeastTwoQueues() {
        #expect(CommandLauncher.queueCount >= 2)
    }
}
