import Dispatch
import TimerdCore
import TimerdProtocol

/// `LIST`: every job (or those with a tag), sorted by name, in slices. The names are taken in one step of
/// the registry's queue and sorted on a queue of their own; then each turn of the registry's queue
/// snapshots `slice` jobs (timers fire between turns), while the JSON of the slice before is written on
/// the list queue. A job added or cancelled meanwhile may or may not be listed, as with any snapshot
/// taken in steps; a job listed is described as it was at one instant.
enum JobList {
    /// Jobs snapshotted per turn of the registry's queue: about half a millisecond (a millisecond or
    /// two while another client keeps the second core busy).
    static let slice = 250

    /// Where names are sorted and JSON is written: never the registry's queue, and not the control
    /// queue either (other clients are served there).
    private static let queue = DispatchQueue(label: "timerd.list")

    /// The reply's payload, byte for byte what `Payload.encode([JobInfo])` would write.
    static func json(_ registry: Registry, tag: String?, viewer: Client) async -> String {
        let names = await sorted(await registry.listNames(tag: tag))
        let output = Output(jobs: names.count)
        await forEachSlice(registry, names, viewer: viewer) { snapshots in
            queue.async { output.append(snapshots) }
        }
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: output.finish()) }
        }
    }

    /// The same as values.
    static func infos(_ registry: Registry, tag: String?, viewer: Client) async -> [JobInfo] {
        var infos: [JobInfo] = []
        let names = await sorted(await registry.listNames(tag: tag))
        await forEachSlice(registry, names, viewer: viewer) { infos += $0.map(JobInfo.init) }
        return infos
    }

    private static func forEachSlice(
        _ registry: Registry, _ names: [JobName], viewer: Client, _ body: ([JobSnapshot]) -> Void
    ) async {
        for start in stride(from: 0, to: names.count, by: slice) {
            body(await registry.snapshots(names[start..<min(start + slice, names.count)], viewer: viewer))
        }
    }

    /// `names` sorted on the list queue (100,000 names take tens of milliseconds).
    static func sorted(_ names: [JobName]) async -> [JobName] {
        guard names.count > slice else { return names.sorted() }
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: names.sorted()) }
        }
    }

    /// The JSON array being written; touched only on `queue`.
    private final class Output: @unchecked Sendable {
        private var json: JSONBytes

        /// Room for `jobs` jobs of a typical size, so the array is not copied as it grows.
        init(jobs: Int) {
            json = JSONBytes(capacity: 2 + jobs * 720)
            json.raw("[")
        }

        func append(_ snapshots: [JobSnapshot]) {
            dispatchPrecondition(condition: .onQueue(JobList.queue))
            for snapshot in snapshots {
                if json.bytes.count > 1 { json.raw(",") }
                JobInfo(snapshot).appendJSON(to: &json)
            }
        }

        func finish() -> String {
            dispatchPrecondition(condition: .onQueue(JobList.queue))
            json.raw("]")
            return String(decoding: json.bytes, as: UTF8.self)
        }
    }
}
