import TimerdCore
import TimerdEngine

/// Every armed job's deadline, on both clocks, so that two Dispatch timers (one per clock,
/// `Registry+Timers.swift`) wake the registry instead of one timer per job (`docs/architecture.md`).
///
/// Each clock has a binary min-heap of entries ordered by deadline, then by when they were armed, that
/// knows where each job's entry is: disarming or re-arming a job removes its entry at once (O(log n)), so
/// no step ever has a heap of stale entries to clean. A value with no timers and no clock reads: the
/// registry asks it when to wake (`wake`) and what is due (`popDue`).
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

    /// A binary min-heap of entries that knows where each job's entry is, so that disarming removes it
    /// in O(log n). (Entries left behind and dropped in one rebuild once they outnumbered live ones made
    /// one step of a `CANCEL` of 100,000 jobs take 6 ms, holding up the fires due meanwhile.)
    private struct Heap {
        var entries: [Entry] = []
        /// The index in `entries` of each job's entry, by job id.
        var positions: [UInt64: Int] = [:]

        mutating func push(_ entry: Entry) {
            entries.append(entry)
            siftUp(entries.count - 1)
        }

        mutating func popFirst() -> Entry? {
            entries.isEmpty ? nil : remove(at: 0)
        }

        /// Removes job `jobID`'s entry, if it has one here.
        mutating func remove(jobID: UInt64) {
            if let index = positions[jobID] { remove(at: index) }
        }

        @discardableResult
        private mutating func remove(at index: Int) -> Entry {
            let removed = entries[index]
            positions[removed.jobID] = nil
            let last = entries.removeLast()
            if index < entries.count {
                entries[index] = last
                if index > 0, last.precedes(entries[(index - 1) / 2]) { siftUp(index) } else { siftDown(index) }
            }
            // A heap mostly emptied (its jobs cancelled) gives its memory back, copying what is left
            // (at most an eighth of its room: 12,500 entries after a cancel of 100,000).
            if entries.capacity > 4_096, entries.count < entries.capacity / 8 {
                var kept: [Entry] = []
                kept.reserveCapacity(entries.count)
                kept.append(contentsOf: entries)
                entries = kept
                positions = Dictionary(uniqueKeysWithValues: positions.lazy.map { ($0.key, $0.value) })
            }
            return removed
        }

        private mutating func siftUp(_ start: Int) {
            var child = start
            let entry = entries[child]
            while child > 0 {
                let parent = (child - 1) / 2
                guard entry.precedes(entries[parent]) else { break }
                entries[child] = entries[parent]
                positions[entries[child].jobID] = child
                child = parent
            }
            entries[child] = entry
            positions[entry.jobID] = child
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
                positions[entries[parent].jobID] = parent
                parent = child
            }
            entries[parent] = entry
            positions[entry.jobID] = parent
        }
    }

    private var heaps = [Heap(), Heap()]
    /// The generation of each armed job's entry, by job id.
    private var armed: [UInt64: UInt64] = [:]
    private var generations: UInt64 = 0

    /// `wake` looks at no more than this many entries: a crowd due together is woken for at its first
    /// deadline, never later than any of them allows.
    static let windowScanLimit = 64

    init() {}

    /// Jobs armed, on either clock.
    var count: Int { armed.count }

    /// Entries held for `clock` (one per job armed on it).
    func entryCount(_ clock: ClockKind) -> Int { heaps[clock.rawValue].entries.count }

    /// Entries `clock`'s heap has room for.
    func entryCapacity(_ clock: ClockKind) -> Int { heaps[clock.rawValue].entries.capacity }

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

    /// The job armed for the earliest deadline on `clock` and that deadline (nanoseconds on it), or nil
    /// when nothing is armed there: the head of its heap, without looking at the rest.
    func first(_ clock: ClockKind) -> (name: JobName, at: Int64)? {
        heaps[clock.rawValue].entries.first.map { ($0.name, $0.at) }
    }

    /// When `clock`'s timer should go off, or nil when nothing is armed on it.
    func wake(_ clock: ClockKind) -> Wake? {
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
            latest = min(latest, Self.adding(entry.at, entry.leeway))
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
            armed[first.jobID] = nil
            due.append(Due(name: first.name, jobID: first.jobID))
        }
        return due
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
        heaps[Int(generation & 1)].remove(jobID: jobID)
        return true
    }

    private static func adding(_ at: Int64, _ leeway: Int64) -> Int64 {
        let (sum, overflow) = at.addingReportingOverflow(leeway)
        return overflow ? .max : sum
    }
}
