import CTimerdSys
import Dispatch
import Glibc
import Synchronization

/// Tells when descriptors become readable or writable: one thread blocked in `epoll_wait`, handlers run
/// on the queue each registration names.
///
/// Why not Dispatch read/write sources: on Linux, libdispatch's epoll bookkeeping can use a freed
/// muxnote when many sources are created and cancelled quickly (swift-corelibs-libdispatch#949); timerd
/// creates several per job run and per client, and crashed that way under load. Timers and signals stay
/// on Dispatch.
///
/// Each registration is one-shot: after an event its handler runs once on its queue, then the descriptor
/// is re-armed with the registration's current interest (unless it was cancelled meanwhile). Between the
/// event and the end of its handler the descriptor stays disarmed, so a registration has at most one
/// handler run waiting on its queue however busy its descriptor is, and other registrations on the same
/// queue get their turn. `cancel`, called on the registration's queue, guarantees the handler never runs
/// again, so the caller may close the descriptor right after.
public final class IOWatcher: Sendable {
    /// What a handler is told and what a registration waits for.
    public struct Events: OptionSet, Sendable, Hashable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Data, end of file, a hang-up or an error is waiting (a reader sees which on `read`).
        public static let readable = Events(rawValue: TSYS_EV_READ)
        /// Room to write, or an error (a writer sees which on `write`).
        public static let writable = Events(rawValue: TSYS_EV_WRITE)
    }

    /// One watched descriptor.
    public final class Registration: Sendable {
        let id: UInt64
        public let fd: FileDescriptor
        let queue: DispatchQueue
        let handler: @Sendable (Events) -> Void
        let state: Locked<State>

        init(id: UInt64, fd: FileDescriptor, interest: Events, queue: DispatchQueue, handler: @escaping @Sendable (Events) -> Void) {
            self.id = id
            self.fd = fd
            self.queue = queue
            self.handler = handler
            self.state = Locked(State(interest: interest))
        }
    }

    struct State: Sendable {
        /// Current interest; nil once cancelled.
        var interest: Events?
        /// An event was taken and its handler has not finished: the descriptor is disarmed until it has.
        var delivering = false
    }

    /// The watcher the daemon uses; its thread starts on first use.
    public static let shared: IOWatcher = {
        do {
            return try IOWatcher()
        } catch {
            fatalError("cannot create the epoll instance: \(error)")
        }
    }()

    private let epoll: FileDescriptor
    private let registrations = Locked<[UInt64: Registration]>([:])
    private let nextID = Atomic<UInt64>(1)

    public init() throws(Errno) {
        epoll = FileDescriptor(rawValue: try checkResult(tsys_epoll_create()))
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            let watcher = Unmanaged<IOWatcher>.fromOpaque(context!).takeRetainedValue()
            // Signals belong to Dispatch's signal sources, never to this thread.
            _ = tsys_thread_block_all_signals()
            watcher.run()
            return nil
        }, box.toOpaque())
        guard result == 0 else {
            box.release()
            throw Errno(rawValue: result)
        }
        pthread_detach(thread)
    }

    /// Starts watching `fd` for `events`; `handler` runs on `queue`.
    ///
    /// The corresponding C function is `epoll_ctl` (`EPOLL_CTL_ADD`).
    public func watch(
        _ fd: FileDescriptor, for events: Events, on queue: DispatchQueue,
        handler: @escaping @Sendable (Events) -> Void
    ) throws(Errno) -> Registration {
        let registration = Registration(
            id: nextID.wrappingAdd(1, ordering: .relaxed).oldValue, fd: fd, interest: events, queue: queue,
            handler: handler)
        registrations.withLock { $0[registration.id] = registration }
        if !events.isEmpty {
            do {
                _ = try checkResult(tsys_epoll_arm(epoll.rawValue, fd.rawValue, events.rawValue, registration.id, 0))
            } catch {
                registrations.withLock { $0[registration.id] = nil }
                throw error
            }
        } else {
            // Registered but idle: add with no interest so later updates can MOD it.
            _ = tsys_epoll_arm(epoll.rawValue, fd.rawValue, 0, registration.id, 0)
        }
        return registration
    }

    /// Changes what `registration` waits for (empty: nothing until the next update). Call it on the
    /// registration's queue. From its own handler, the new interest takes effect when the handler returns.
    ///
    /// The corresponding C function is `epoll_ctl` (`EPOLL_CTL_MOD`).
    public func update(_ registration: Registration, to events: Events) {
        registration.state.withLock { state in
            guard state.interest != nil else { return }
            state.interest = events
            // Arming now as well as after the handler would queue a second handler run; a descriptor that
            // stays ready would then add one more run to the queue each time, ahead of every other
            // registration on it (a client streaming a long line starved the other clients for seconds).
            guard !state.delivering else { return }
            arm(registration, events)
        }
    }

    /// Stops watching. Called on the registration's queue, the handler never runs again and the
    /// descriptor may be closed right after.
    ///
    /// The corresponding C function is `epoll_ctl` (`EPOLL_CTL_DEL`).
    public func cancel(_ registration: Registration) {
        let wasActive = registration.state.withLock { state -> Bool in
            defer { state.interest = nil }
            return state.interest != nil
        }
        guard wasActive else { return }
        _ = tsys_epoll_remove(epoll.rawValue, registration.fd.rawValue)
        registrations.withLock { $0[registration.id] = nil }
    }

    /// Re-arms `registration` with its current interest once its handler has run.
    private func finishDelivery(_ registration: Registration) {
        registration.state.withLock { state in
            // Under the lock, so a concurrent cancel cannot slip between the check and the MOD.
            state.delivering = false
            guard let interest = state.interest else { return }
            arm(registration, interest)
        }
    }

    /// Call with the registration's lock held.
    private func arm(_ registration: Registration, _ interest: Events) {
        _ = tsys_epoll_arm(epoll.rawValue, registration.fd.rawValue, interest.rawValue, registration.id, 1)
    }

    private func run() {
        var ids = [UInt64](repeating: 0, count: 64)
        var events = [UInt32](repeating: 0, count: 64)
        while true {
            let count = ids.withUnsafeMutableBufferPointer { idBuffer in
                events.withUnsafeMutableBufferPointer { eventBuffer in
                    tsys_epoll_wait(epoll.rawValue, idBuffer.baseAddress, eventBuffer.baseAddress, 64, -1)
                }
            }
            if count < 0 {
                if errno == EINTR { continue }
                fatalError("epoll_wait failed: \(Errno(rawValue: errno))")
            }
            for index in 0..<Int(count) {
                guard let registration = registrations.withLock({ $0[ids[index]] }) else { continue }
                // A second event while a handler run is pending can only come from an update that armed the
                // descriptor just before the first event was taken here: drop it. Nothing is lost, since
                // readiness is level-triggered: the re-arm after the handler reports what is still ready.
                let taken = registration.state.withLock { state -> Bool in
                    guard state.interest != nil, !state.delivering else { return false }
                    state.delivering = true
                    return true
                }
                guard taken else { continue }
                let fired = Events(rawValue: events[index])
                registration.queue.async {
                    // Cancelled after the event was taken: drop it (the fd may already be closed).
                    guard registration.state.withLock({ $0.interest != nil }) else { return }
                    registration.handler(fired)
                    self.finishDelivery(registration)
                }
            }
        }
    }
}
