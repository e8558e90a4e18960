import Dispatch
import Glibc

/// Tells when cgroups empty out: one inotify instance watching each cgroup's `cgroup.events` for
/// `IN_MODIFY` (the kernel touches it when `populated` flips), as systemd does, with the `IOWatcher`
/// watching the inotify descriptor. Handlers run on the queue given at creation; a handler rereads
/// `cgroup.events`, since a modification says only that something changed.
public final class CgroupEvents: Sendable {
    /// The handlers by watch, shared with the watcher's handler (which must not hold `self`).
    private final class Handlers: Sendable {
        let byWatch = Locked<[Int32: @Sendable () -> Void]>([:])
    }

    private let inotify: FileDescriptor
    private let handlers = Handlers()

    /// The corresponding C function is `inotify_init1`.
    public init(queue: DispatchQueue) throws(Errno) {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw Errno.current }
        inotify = FileDescriptor(rawValue: fd)
        let handlers = handlers
        let inotify = inotify
        do {
            // The watcher keeps the registration for the daemon's life.
            _ = try IOWatcher.shared.watch(inotify, for: .readable, on: queue) { _ in
                Self.drain(inotify, handlers: handlers)
            }
        } catch {
            try? inotify.close()
            throw error
        }
    }

    /// Calls `handler` on the queue whenever `cgroup`'s `cgroup.events` changes, until `forget`.
    /// Returns the watch to give to `forget`.
    ///
    /// The corresponding C function is `inotify_add_watch`.
    public func watch(_ cgroup: CgroupDirectory, handler: @escaping @Sendable () -> Void) throws(Errno) -> Int32 {
        let wd = inotify_add_watch(inotify.rawValue, cgroup.path + "/cgroup.events", UInt32(IN_MODIFY))
        guard wd >= 0 else { throw Errno.current }
        handlers.byWatch.withLock { $0[wd] = handler }
        return wd
    }

    /// Stops calling the handler of `wd` (on the queue: no call after this returns).
    ///
    /// The corresponding C function is `inotify_rm_watch`.
    public func forget(_ wd: Int32) {
        guard handlers.byWatch.withLock({ $0.removeValue(forKey: wd) }) != nil else { return }
        _ = inotify_rm_watch(inotify.rawValue, wd)
    }

    /// Reads every waiting event and calls the handlers of the watches they name, each once.
    private static func drain(_ inotify: FileDescriptor, handlers: Handlers) {
        var touched: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { raw in (try? inotify.tryRead(into: raw)) ?? nil }
            guard let count, count > 0 else { break }
            var offset = 0
            // struct inotify_event: int wd; uint32_t mask, cookie, len; char name[len].
            while offset + 16 <= count {
                let (wd, length) = buffer.withUnsafeBytes { raw in
                    (raw.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                     Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                if !touched.contains(wd) { touched.append(wd) }
                offset += 16 + length
            }
        }
        for wd in touched {
            if let handler = handlers.byWatch.withLock({ $0[wd] }) { handler() }
        }
    }
}
