import TimerdCore
import TimerdEngine

/// Every armed job's deadline, on both clocks, so that two Dispatch timers (one per clock,
/// `Registry+Timers.swift`) wake the registry instead of one timer per job (`docs/architecture.md`).
///
/// Each clock has a binary min-heap of entries ordered by deadline, then by when they were armed.
/// Disarming or re-arming a job does not search the heap: the job's entry is the one whose generation
/// `armed` holds, and any other is dropped when it comes to the top, or all at once when stale entries
/// outnumber live ones (lazy deletion). A value with no timers and no clock reads: the registry asks it
/// when to wake (`wake`) and what is due (`popDue`).
struct DeadlineQueue {
    /// The clock a deadline is on: nanoseconds since boot, or since the epoch.
    enum ClockKind: Int, CaseIterable {
        case mono = 0
        case wall = 1
    }

    /// A job whose deadline has passed: what the registry delivers as `deadlineReached`.
    struct Due: Equatable {
        var name: JobName
        var jobID: UInt64
    }

    /// When a clock's timer should go off: not before `earliest`, the first deadline, and not after
    /// `latest`, the last instant at which every job due by then is still within its own leeway.
    struct Wake: Equatable {
        var earliest: Int64
        var latest: Int64
        var leeway: Int64 { latest - earliest }
    }

    private struct Entry {
        /// Nanoseconds on the entry's clock.
        var at: Int64
        var leeway: Int64
        /// Unique to one arming, increasing (ties at one deadline come out in the order armed); its low
        /// bit is the clock.
        var generation: UInt64
        var jobID: UInt64
        var name: JobName

        func precedes(_ other: Entry) -> Bool {
            at != other.at ? at < other.at : generation < other.generation
        }
    }

    /// A binary min-heap of entries, with a count of those that are no longer armed.
    private struct Heap {
        var entries: [Entry] = []
        var stale = 0

        mutating func push(_ entry: Entry) {
            entries.append(entry)
            siftUp(entries.count - 1)
        }

        mutating func popFirst() -> Entry? {
            guard !entries.isEmpty else { return nil }
            let first = entries[0]
            let last = entries.removeLast()
            if !entries.isEmpty {
                entries[0] = last
                siftDown(0)
            }
            return first
        }

        /// Keeps only the entries `isLive` accepts, in a new array (so a heap that was mostly stale
        /// gives its memory back), and restores the heap order.
        mutating func rebuild(keeping isLive: (Entry) -> Bool) {
            entries = entries.filter(isLive)
            stale = 0
            var index = entries.count / 2
            while index > 0 {
                index -= 1
                siftDown(index)
            }
        }

        private mutating func siftUp(_ start: Int) {
            var child = start
            let entry = entries[child]
            while child > 0 {
                let parent = (child - 1) / 2
                guard entry.precedes(entries[parent]) else { break }
                entries[child] = entries[parent]
                child = parent
            }
            entries[child] = entry
        }

        private mutating func siftDown(_ start: Int) {
            var parent = start
            let entry = entries[parent]
            let count = entries.count
            while true {
                var child = 2 * parent + 1
                guard child < count else { break }
                if child + 1 < count, entries[child + 1].precedes(entries[child]) { child += 1 }
                guard entries[child].precedes(entry) else { break }
                entries[parent] = entries[child]
                parent = child
            }
            entries[parent] = entry
        }
    }

    private var heaps = [Heap(), Heap()]
    /// The generation of each armed job's entry, by job id.
    private var armed: [UInt64: UInt64] = [:]
    private var generations: UInt64 = 0

    /// A heap this stale or more is rebuilt once stale entries outnumber live ones.
    private static let rebuildFloor = 1_024
    /// `wake` looks at no more than this many entries: a crowd due together is woken for at its first
    /// deadline, never later than any of them allows.
    static let windowScanLimit = 64

    init() {}

    /// Jobs armed, on either clock.
    var count: Int { armed.count }

    /// Entries held for `clock`, stale ones included.
    func entryCount(_ clock: ClockKind) -> Int { heaps[clock.rawValue].entries.count }

    /// Arms `name` (job `jobID`) for `deadline`, replacing its earlier deadline if it had one.
    /// Returns the clock whose heap received it and the deadline there in nanoseconds.
    @discardableResult
    mutating func arm(_ name: JobName, jobID: UInt64, _ deadline: Deadline, leeway: Duration) -> (clock: ClockKind, at: Int64) {
        let (clock, at) = Self.position(deadline)
        forget(jobID)
        generations += 1
        let generation = generations << 1 | UInt64(clock.rawValue)
        armed[jobID] = generation
        heaps[clock.rawValue].push(Entry(at: at, leeway: max(0, leeway.nanoseconds), generation: generation, jobID: jobID, name: name))
        return (clock, at)
    }

    /// Disarms job `jobID`; false if it was not armed.
    @discardableResult
    mutating func disarm(jobID: UInt64) -> Bool { forget(jobID) }

    /// Whether job `jobID` is armed.
    func isArmed(jobID: UInt64) -> Bool { armed[jobID] != nil }

    /// When `clock`'s timer should go off, or nil when nothing is armed on it. Drops stale entries
    /// from the top first.
    mutating func wake(_ clock: ClockKind) -> Wake? {
        dropStaleFirst(clock)
        let entries = heaps[clock.rawValue].entries
        guard let first = entries.first else { return nil }
        var latest = Self.adding(first.at, first.leeway)
        // No leeway: nothing after it can end the window sooner.
        guard latest > first.at else { return Wake(earliest: first.at, latest: latest) }
        // Every entry that could fall due by `latest` narrows it to its own window. They are looked at
        // earliest first (the heap's order: below an entry nothing is earlier), from a frontier of
        // entries whose parents were looked at.
        var frontier = [0]
        var looked = 0
        while let next = frontier.indices.min(by: { entries[frontier[$0]].at < entries[frontier[$1]].at }) {
            let index = frontier.remove(at: next)
            let entry = entries[index]
            guard entry.at <= latest else { break }
            guard looked < Self.windowScanLimit else {
                // Not looked at: wake by its deadline, so neither it nor anything after it is late.
                latest = entry.at
                break
            }
            looked += 1
            if armed[entry.jobID] == entry.generation { latest = min(latest, Self.adding(entry.at, entry.leeway)) }
            if 2 * index + 1 < entries.count { frontier.append(2 * index + 1) }
            if 2 * index + 2 < entries.count { frontier.append(2 * index + 2) }
        }
        return Wake(earliest: first.at, latest: latest)
    }

    /// Removes and returns the jobs on `clock` whose deadline is at or before `now`, earliest first
    /// (ties in the order they were armed). They are no longer armed.
    mutating func popDue(_ clock: ClockKind, at now: Int64) -> [Due] {
        var due: [Due] = []
        while let first = heaps[clock.rawValue].entries.first, first.at <= now {
            _ = heaps[clock.rawValue].popFirst()
            if armed[first.jobID] == first.generation {
                armed[first.jobID] = nil
                due.append(Due(name: first.name, jobID: first.jobID))
            } else {
                heaps[clock.rawValue].stale -= 1
            }
        }
        return due
    }

    /// Whether `clock`'s first entry is stale (its timer may be armed for a job no longer there).
    func firstIsStale(_ clock: ClockKind) -> Bool {
        guard let first = heaps[clock.rawValue].entries.first else { return false }
        return armed[first.jobID] != first.generation
    }

    /// Where `deadline` goes: its clock and nanoseconds on it (a monotonic deadline beyond `Int64`
    /// nanoseconds, centuries away, is kept at the largest).
    static func position(_ deadline: Deadline) -> (clock: ClockKind, at: Int64) {
        switch deadline {
        case .mono(let instant): (.mono, Int64(clamping: instant.nanosecondsSinceBoot))
        case .wall(let time): (.wall, time.nanosecondsSinceEpoch)
        }
    }

    @discardableResult
    private mutating func forget(_ jobID: UInt64) -> Bool {
        guard let generation = armed.removeValue(forKey: jobID) else { return false }
        let index = Int(generation & 1)
        heaps[index].stale += 1
        if heaps[index].stale >= Self.rebuildFloor, heaps[index].stale * 2 > heaps[index].entries.count {
            let armed = self.armed
            heaps[index].rebuild { armed[$0.jobID] == $0.generation }
        }
        return true
    }

    private mutating func dropStaleFirst(_ clock: ClockKind) {
        while firstIsStale(clock) {
            _ = heaps[clock.rawValue].popFirst()
            heaps[clock.rawValue].stale -= 1
        }
    }

    private static func adding(_ at: Int64, _ leeway: Int64) -> Int64 {
        let (sum, overflow) = at.addingReportingOverflow(leeway)
        return overflow ? .max : sum
    }
}
