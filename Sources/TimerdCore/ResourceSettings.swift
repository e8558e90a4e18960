/// A limit's value: a number, or none at all (`infinity`).
public enum LimitValue: Equatable, Sendable, Comparable {
    case value(UInt64)
    case infinity

    /// The number, or `UInt64.max` for `infinity` (what the kernel's `RLIM_INFINITY` is).
    public var raw: UInt64 {
        switch self {
        case .value(let number): number
        case .infinity: .max
        }
    }

    public static func < (lhs: LimitValue, rhs: LimitValue) -> Bool { lhs.raw < rhs.raw }
}

/// An I/O scheduling class and level, as `ionice` sets them (`ionice=idle`, `best-effort:4`, `realtime:0`).
public struct IOPriority: Equatable, Sendable, CustomStringConvertible {
    public enum Class: String, Sendable {
        case realtime
        case bestEffort = "best-effort"
        case idle

        /// The kernel's `IOPRIO_CLASS_*`.
        var number: Int32 {
            switch self {
            case .realtime: 1
            case .bestEffort: 2
            case .idle: 3
            }
        }
    }

    public var ioClass: Class
    /// 0 (first served) to 7; always 0 for `idle`.
    public var level: Int

    public init(_ ioClass: Class, level: Int = 4) {
        self.ioClass = ioClass
        self.level = ioClass == .idle ? 0 : level
    }

    /// What `ioprio_set` takes: the class in the top bits, the level in the low ones.
    public var kernelValue: Int32 { ioClass.number << 13 | Int32(level) }

    public var description: String { ioClass == .idle ? "idle" : "\(ioClass.rawValue):\(level)" }

    static func parse(_ text: String) throws(TimerdError) -> IOPriority {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let problem = TimerdError(
            .badArgument, "ionice: expected idle, best-effort, best-effort:N or realtime:N (N from 0 to 7), got \"\(text)\"",
            key: "ionice")
        guard let ioClass = Class(rawValue: parts[0]) else { throw problem }
        guard parts.count == 2 else { return IOPriority(ioClass) }
        guard ioClass != .idle, parts[1].count == 1, let level = Int(parts[1]), (0...7).contains(level) else { throw problem }
        return IOPriority(ioClass, level: level)
    }
}

/// A resource limit of the run's processes (`setrlimit`), as systemd's `Limit*=` keys name them
/// (`limit_nofile=1024`, `limit_core=0`, `limit_cpu=1h`, `limit_as=1G:2G`).
public struct ProcessLimit: Equatable, Sendable {
    public enum Kind: String, CaseIterable, Sendable {
        // In `RLIMIT_*` order.
        case cpu, fsize, data, stack, core, rss, nproc, nofile, memlock, `as`, locks, sigpending, msgqueue, nice, rtprio, rttime

        /// The Linux `RLIMIT_*` number (the same on every architecture timerd builds for).
        public var resource: Int32 {
            switch self {
            case .cpu: 0
            case .fsize: 1
            case .data: 2
            case .stack: 3
            case .core: 4
            case .rss: 5
            case .nproc: 6
            case .nofile: 7
            case .memlock: 8
            case .as: 9
            case .locks: 10
            case .sigpending: 11
            case .msgqueue: 12
            case .nice: 13
            case .rtprio: 14
            case .rttime: 15
            }
        }

        /// What its numbers count.
        enum Unit { case bytes, count, seconds, microseconds }

        var unit: Unit {
            switch self {
            case .fsize, .data, .stack, .core, .rss, .as, .memlock, .msgqueue: .bytes
            case .cpu: .seconds
            case .rttime: .microseconds
            case .nofile, .nproc, .locks, .sigpending, .nice, .rtprio: .count
            }
        }

        /// `limit_nofile`.
        public var key: String { "limit_\(rawValue)" }
    }

    public var kind: Kind
    public var soft: LimitValue
    public var hard: LimitValue

    public init(_ kind: Kind, soft: LimitValue, hard: LimitValue) {
        self.kind = kind
        self.soft = soft
        self.hard = hard
    }

    /// `1024`, `512:4096`, `infinity`, `1G`, `1h` (`limit_cpu`), as `parse` reads it.
    public var text: String {
        soft == hard ? format(soft) : "\(format(soft)):\(format(hard))"
    }

    private func format(_ value: LimitValue) -> String {
        guard case .value(let number) = value else { return "infinity" }
        switch kind.unit {
        case .bytes: return ByteCount.format(number)
        case .seconds: return DurationText.format(.seconds(Int64(clamping: number)))
        case .microseconds: return DurationText.format(.microseconds(Int64(clamping: number)))
        case .count: return String(number)
        }
    }

    static func parse(_ kind: Kind, _ text: String) throws(TimerdError) -> ProcessLimit {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let soft = try value(kind, parts[0], text)
        let hard = parts.count == 2 ? try value(kind, parts[1], text) : soft
        guard soft <= hard else {
            throw TimerdError(.badArgument, "\(kind.key): the soft limit (before the colon) is above the hard one", key: kind.key)
        }
        return ProcessLimit(kind, soft: soft, hard: hard)
    }

    private static func value(_ kind: Kind, _ part: String, _ whole: String) throws(TimerdError) -> LimitValue {
        if part == "infinity" { return .infinity }
        let what: String
        switch kind.unit {
        case .bytes:
            if let bytes = ByteCount.parse(part) { return .value(UInt64(bytes)) }
            what = "a size like 1024, 64K, 512M or 1G"
        case .count:
            if part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = UInt64(part) { return .value(number) }
            what = "a whole number"
        case .seconds, .microseconds:
            if let duration = try? DurationText.parse(part), duration >= .zero {
                let nanoseconds = duration.nanoseconds
                // Whole seconds, rounded up as systemd does: 1.5s of CPU is a limit of 2.
                return .value(kind.unit == .seconds ? UInt64((nanoseconds + 999_999_999) / 1_000_000_000)
                                                     : UInt64((nanoseconds + 999) / 1_000))
            }
            what = "a duration like 30s or 1h"
        }
        throw TimerdError(.badArgument, "\(kind.key): expected \(what), infinity, or SOFT:HARD of them, got \"\(whole)\"", key: kind.key)
    }
}

/// What a command's run may use (`docs/configuration.md`, "Resource control"): limits written to the
/// run's cgroup, where timerd's cgroup has the controller (`memory_max`, `memory_high`, `memory_swap_max`,
/// `cpu_quota`, `cpu_weight`, `io_weight`, `tasks_max`), and settings of the run's first process that its
/// children inherit, made between clone and exec (`nice`, `ionice`, `oom_score_adj`, `limit_*`). All
/// optional: nothing set changes nothing.
public struct ResourceSettings: Equatable, Sendable {
    public var memoryMax: LimitValue?
    public var memoryHigh: LimitValue?
    public var memorySwapMax: LimitValue?
    /// Percent of one CPU (`cpu_quota=150%`: one and a half), as systemd's `CPUQuota=`.
    public var cpuQuota: Int?
    public var cpuWeight: Int?
    public var ioWeight: Int?
    public var tasksMax: LimitValue?
    public var nice: Int?
    public var ionice: IOPriority?
    public var oomScoreAdj: Int?
    /// In `ProcessLimit.Kind` order, each kind at most once.
    public var limits: [ProcessLimit] = []

    public init() {}

    /// The keys written to the run's cgroup, with the controller each needs.
    public static let cgroupKeys: [(key: String, controller: String)] = [
        ("memory_max", "memory"), ("memory_high", "memory"), ("memory_swap_max", "memory"), ("cpu_quota", "cpu"),
        ("cpu_weight", "cpu"), ("io_weight", "io"), ("tasks_max", "pids"),
    ]
    public static let processKeys = ["nice", "ionice", "oom_score_adj"] + ProcessLimit.Kind.allCases.map(\.key)
    /// Every key, in the order `options` writes them.
    public static let keys = cgroupKeys.map(\.key) + processKeys
    /// The keys a per-user ceiling can be set for in `[daemon]` (as `user_KEY`): the limits with a top.
    public static let ceilingKeys = ["memory_max", "memory_high", "memory_swap_max", "cpu_quota", "tasks_max"]
        + ProcessLimit.Kind.allCases.map(\.key)

    public var isEmpty: Bool { self == ResourceSettings() }

    /// The settings among `single` (key → value; other keys are ignored).
    public init(single: OptionValues) throws(TimerdError) {
        // Most jobs set no limit: not asking for each key (nor making the `limit_…` names) saves a few
        // percent of parsing one (docs/performance.md, "ADD's parsing").
        guard Self.keys.contains(where: { single[$0] != nil }) else { return }
        func size(_ key: String, allowZero: Bool) throws(TimerdError) -> LimitValue? {
            guard let text = single[key] else { return nil }
            if text == "infinity" { return .infinity }
            guard let bytes = ByteCount.parse(text), bytes > 0 || allowZero else {
                throw TimerdError(.badArgument, "\(key): expected a size like 512M or 2G, or infinity, got \"\(text)\"", key: key)
            }
            return .value(UInt64(bytes))
        }
        func number(_ key: String, _ range: ClosedRange<Int>) throws(TimerdError) -> Int? {
            guard let text = single[key] else { return nil }
            let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text), range.contains(value) else {
                throw TimerdError(.badArgument, "\(key): expected a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text)\"", key: key)
            }
            return value
        }
        memoryMax = try size("memory_max", allowZero: false)
        memoryHigh = try size("memory_high", allowZero: false)
        memorySwapMax = try size("memory_swap_max", allowZero: true)
        if let text = single["cpu_quota"] {
            let digits = text.hasSuffix("%") ? String(text.dropLast()) : ""
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let percent = Int(digits),
                  (1...100_000).contains(percent) else {
                throw TimerdError(.badArgument, "cpu_quota: expected a percentage of one CPU from 1% to 100000%, like 50% or 200%, got \"\(text)\"", key: "cpu_quota")
            }
            cpuQuota = percent
        }
        cpuWeight = try number("cpu_weight", 1...10_000)
        ioWeight = try number("io_weight", 1...10_000)
        if let text = single["tasks_max"] {
            if text == "infinity" {
                tasksMax = .infinity
            } else {
                tasksMax = .value(UInt64(try number("tasks_max", 1...4_194_304)!))
            }
        }
        nice = try number("nice", -20...19)
        ionice = try single["ionice"].map { text throws(TimerdError) in try IOPriority.parse(text) }
        oomScoreAdj = try number("oom_score_adj", -1000...1000)
        for kind in ProcessLimit.Kind.allCases {
            if let text = single[kind.key] { limits.append(try ProcessLimit.parse(kind, text)) }
        }
    }

    /// The settings as canonical `key=value` options, in `keys` order.
    public var options: [KeyValue] {
        var list: [KeyValue] = []
        func size(_ key: String, _ value: LimitValue?) {
            guard let value else { return }
            list.append(KeyValue(key, value == .infinity ? "infinity" : ByteCount.format(value.raw)))
        }
        size("memory_max", memoryMax)
        size("memory_high", memoryHigh)
        size("memory_swap_max", memorySwapMax)
        if let cpuQuota { list.append(KeyValue("cpu_quota", "\(cpuQuota)%")) }
        if let cpuWeight { list.append(KeyValue("cpu_weight", String(cpuWeight))) }
        if let ioWeight { list.append(KeyValue("io_weight", String(ioWeight))) }
        if let tasksMax { list.append(KeyValue("tasks_max", tasksMax == .infinity ? "infinity" : String(tasksMax.raw))) }
        if let nice { list.append(KeyValue("nice", String(nice))) }
        if let ionice { list.append(KeyValue("ionice", ionice.description)) }
        if let oomScoreAdj { list.append(KeyValue("oom_score_adj", String(oomScoreAdj))) }
        list += limits.map { KeyValue($0.kind.key, $0.text) }
        return list
    }

    /// The keys set that need a cgroup controller, with that controller, in `cgroupKeys` order.
    public var cgroupSettings: [(key: String, controller: String)] {
        let set = Set(options.map(\.key))
        return Self.cgroupKeys.filter { set.contains($0.key) }
    }

    /// What to write to the run's cgroup: interface file and value, as systemd writes them.
    public var cgroupFiles: [(file: String, value: String)] {
        var files: [(String, String)] = []
        func limit(_ value: LimitValue) -> String { value == .infinity ? "max" : String(value.raw) }
        if let memoryMax { files.append(("memory.max", limit(memoryMax))) }
        if let memoryHigh { files.append(("memory.high", limit(memoryHigh))) }
        if let memorySwapMax { files.append(("memory.swap.max", limit(memorySwapMax))) }
        // A period of 100 ms, as systemd's default CPUQuotaPeriodSec=.
        if let cpuQuota { files.append(("cpu.max", "\(cpuQuota * 1_000) 100000")) }
        if let cpuWeight { files.append(("cpu.weight", String(cpuWeight))) }
        if let ioWeight { files.append(("io.weight", "default \(ioWeight)")) }
        if let tasksMax { files.append(("pids.max", limit(tasksMax))) }
        return files
    }

    /// The limit of `kind`, if set.
    public func limit(_ kind: ProcessLimit.Kind) -> ProcessLimit? {
        limits.first { $0.kind == kind }
    }

    /// These settings under `ceiling` (a user's, from `[daemon]`): each limit the ceiling sets is the lower
    /// of the two, and set where these leave it unset.
    public func capped(by ceiling: ResourceSettings) -> ResourceSettings {
        var capped = self
        func lower(_ mine: LimitValue?, _ top: LimitValue?) -> LimitValue? {
            guard let top else { return mine }
            return mine.map { min($0, top) } ?? top
        }
        capped.memoryMax = lower(memoryMax, ceiling.memoryMax)
        capped.memoryHigh = lower(memoryHigh, ceiling.memoryHigh)
        capped.memorySwapMax = lower(memorySwapMax, ceiling.memorySwapMax)
        if let top = ceiling.cpuQuota { capped.cpuQuota = min(cpuQuota ?? top, top) }
        capped.tasksMax = lower(tasksMax, ceiling.tasksMax)
        for top in ceiling.limits {
            let mine = limit(top.kind)
            let merged = ProcessLimit(top.kind, soft: min(mine?.soft ?? top.soft, top.soft), hard: min(mine?.hard ?? top.hard, top.hard))
            capped.limits.removeAll { $0.kind == top.kind }
            capped.limits.append(merged)
        }
        capped.limits.sort { $0.kind.resource < $1.kind.resource }
        return capped
    }

    /// The first key whose value is above `ceiling`'s (as `KEY=VALUE is above user_KEY=…`), or nil.
    public func aboveCeiling(_ ceiling: ResourceSettings) -> String? {
        let mine = Dictionary(uniqueKeysWithValues: options.map { ($0.key, $0.value) })
        let capped = capped(by: ceiling)
        let top = Dictionary(uniqueKeysWithValues: ceiling.options.map { ($0.key, $0.value) })
        for option in capped.options where mine[option.key] != nil && mine[option.key] != option.value {
            return "\(option.key)=\(mine[option.key]!) is above user_\(option.key)=\(top[option.key] ?? option.value)"
        }
        return nil
    }
}
