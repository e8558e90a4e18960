import TimerdCore

/// `max_output_memory`: the last run's output of every job is held for `show`, up to a daemon-wide total.
/// Beyond it the oldest held outputs are dropped from memory (the history in the state store keeps its
/// copy), so many jobs with chatty commands cannot grow timerd without bound.
///
/// `bytes` is the exact total; `order` lists outputs oldest first by sequence number, with stale entries
/// (a job's output since replaced, or the job gone) skipped and compacted.
struct HeldOutputs {
    /// What `show` says instead of an output dropped for the limit.
    static let droppedOutput = "[output no longer held in memory: max_output_memory was reached; see timerctl history]"

    private struct Entry {
        var jobID: UInt64
        var output: String
        var sequence: UInt64
        var dropped: Bool
    }

    private var held: [JobName: Entry] = [:]
    private var order: [(sequence: UInt64, name: JobName)] = []
    private var start = 0
    private var nextSequence: UInt64 = 0
    private(set) var bytes = 0
    private(set) var droppedCount = 0

    /// The last output of the job with `jobID` as `show` gives it (nil: none held).
    func output(of name: JobName, jobID: UInt64) -> String? {
        guard let entry = held[name], entry.jobID == jobID else { return nil }
        return entry.dropped ? Self.droppedOutput : entry.output
    }

    /// Holds a job's newest output, then drops the oldest outputs while over `limit` bytes.
    mutating func hold(_ output: String, of name: JobName, jobID: UInt64, limit: Int, log: Logger) {
        forget(name)
        guard !output.isEmpty else { return }
        nextSequence += 1
        held[name] = Entry(jobID: jobID, output: output, sequence: nextSequence, dropped: false)
        bytes += output.utf8.count
        order.append((nextSequence, name))
        while bytes > limit, start < order.count {
            let (sequence, oldest) = order[start]
            start += 1
            guard var entry = held[oldest], entry.sequence == sequence, !entry.dropped else { continue }
            bytes -= entry.output.utf8.count
            entry.output = ""
            entry.dropped = true
            held[oldest] = entry
            droppedCount += 1
            if droppedCount.isLogMilestone {
                log.warning("max_output_memory (\(limit) bytes) reached: dropped the held output of \(oldest) and \(droppedCount - 1) earlier (the history keeps them)")
            }
        }
        // Stale entries pile up as jobs run again; compact once they outnumber the held outputs.
        if order.count - start > 2 * held.count + 1_024 || start > order.count / 2 {
            order = order[start...].filter { held[$0.name]?.sequence == $0.sequence }
            start = 0
        }
    }

    /// Forgets a job's output (it was cancelled, or has a newer one).
    mutating func forget(_ name: JobName) {
        guard let entry = held.removeValue(forKey: name) else { return }
        bytes -= entry.output.utf8.count
    }
}
