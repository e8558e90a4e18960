import Dispatch
import Synchronization
import TimerdCore
import TimerdProtocol

/// `LIST`: every job (or those with a tag), sorted by name, in slices. The names are taken in one step of
/// the registry's queue and sorted off it; then each turn of the registry's queue snapshots `slice` jobs
/// (timers fire between turns), while the JSON of the slice before is written off it, on the registry's
/// background thread, which keeps clear of fires (`Registry.clearance`), and handed on (to the client's socket, as
/// it is written: `stream`). A job added or cancelled meanwhile may or may not be listed, as with any
/// snapshot taken in steps; a job listed is described as it was at one instant.
enum JobList {
    /// Jobs snapshotted per turn of the registry's queue: a fifth of a millisecond or so. With 250 a
    /// turn the 100 ms jobs' lateness during a `LIST` of 100,000 went above 2 ms in 6 of 8 runs, with 100
    /// in 2 of 9, with 50 no better and the `LIST` slower (docs/performance.md, "LIST slices").
    static let slice = 100

    /// Where names are sorted: never the registry's queue, and not the control queue either (other
    /// clients are served there).
    private static let queue = DispatchQueue(label: "timerd.list")

    /// The reply's payload, byte for byte what `Payload.encode([JobInfo])` would write (held whole: for
    /// callers in the daemon and tests; a connection streams it).
    static func json(_ registry: Registry, tag: String?, viewer: Client) async -> String {
        let all = Mutex<[UInt8]>([])
        await write(registry, tag: tag, viewer: viewer) { chunk in
            all.withLock { $0 += chunk }
            return true
        }
        return String(decoding: all.withLock { $0 }, as: UTF8.self)
    }

    /// The reply line, `OK [...]` and its newline, handed to `sink` a slice at a time as it is written,
    /// each chunk once the one before was taken; stops early once `sink` says nobody reads any more.
    /// The line is exactly what `Reply.ok(json(…)).appendLine` writes, so clients see one reply line.
    static func stream(_ registry: Registry, tag: String?, viewer: Client, to sink: @escaping @Sendable ([UInt8]) async -> Bool) async {
        guard await sink(Array("OK ".utf8)) else { return }
        var open = true
        await write(registry, tag: tag, viewer: viewer) { chunk in
            open = await sink(chunk)
            return open
        }
        if open { _ = await sink([UInt8(ascii: "\n")]) }
    }

    /// The JSON array to `sink` in chunks: `[` and the first slice's jobs, then each slice's, then `]`.
    /// A slice's JSON is written (off the registry's queue) while the next slice is snapshotted.
    private static func write(_ registry: Registry, tag: String?, viewer: Client, to sink: ([UInt8]) async -> Bool) async {
        let names = await sorted(await registry.listNames(tag: tag))
        var listed = 0
        var encoding: Task<(bytes: [UInt8], jobs: Int), Never>?
        for start in stride(from: 0, to: names.count, by: slice) {
            let snapshots = await registry.snapshots(names[start..<min(start + slice, names.count)], viewer: viewer)
            if let encoding {
                let (bytes, jobs) = await encoding.value
                listed += jobs
                guard await sink(bytes) else { return }
            }
            let first = start == 0
            let after = listed
            encoding = Task { await registry.background.run { (encode(snapshots, opening: first, after: after), snapshots.count) } }
        }
        var last = await encoding?.value.bytes ?? Array("[".utf8)
        last.append(UInt8(ascii: "]"))
        _ = await sink(last)
    }

    /// One slice's jobs as JSON: after `[` when `opening`, each after a comma unless it is the first job.
    private static func encode(_ snapshots: [JobSnapshot], opening: Bool, after listed: Int) -> [UInt8] {
        var json = JSONBytes(capacity: 1 + snapshots.count * 720)
        if opening { json.raw("[") }
        for (index, snapshot) in snapshots.enumerated() {
            if listed + index > 0 { json.raw(",") }
            JobInfo(snapshot).appendJSON(to: &json)
        }
        return json.bytes
    }

    /// The same as values.
    static func infos(_ registry: Registry, tag: String?, viewer: Client) async -> [JobInfo] {
        var infos: [JobInfo] = []
        let names = await sorted(await registry.listNames(tag: tag))
        for start in stride(from: 0, to: names.count, by: slice) {
            infos += await registry.snapshots(names[start..<min(start + slice, names.count)], viewer: viewer).map(JobInfo.init)
        }
        return infos
    }

    /// `names` sorted, each once, on the list queue.
    static func sortedUnique(_ names: [JobName]) async -> [JobName] {
        await withCheckedContinuation { continuation in
            queue.async {
                let strictlyIncreasing = zip(names, names.dropFirst()).allSatisfy { $0 < $1 }
                continuation.resume(returning: strictlyIncreasing ? names : Array(Set(names)).sorted())
            }
        }
    }

    /// `names` sorted on the list queue (100,000 names take tens of milliseconds).
    static func sorted(_ names: some Collection<JobName> & Sendable) async -> [JobName] {
        guard names.count > slice else { return names.sorted() }
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: names.sorted()) }
        }
    }
}
