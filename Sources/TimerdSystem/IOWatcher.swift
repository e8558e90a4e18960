import CTimerdSys
import Dispatch
import Glibc
import Synchronization

/// Tells when descriptors become readable or writable, and when a deadline has come: one thread blocked in
/// `epoll_wait`, handlers run on the queue each registration names.
///
/// In the daemon that thread is the main thread (`runOnMainThread`), which also runs what is queued on the
/// main Dispatch queue between events, and the registry's and the runs' lane targets the main queue
/// (`QueueExecutor.core`): a due timer's descriptor, the fire, the spawn of its command, and the run's
/// output and exit are all handled by the thread that `epoll_wait` woke, with no other thread woken for
/// them (`docs/architecture.md`, "Concurrency").
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
        /// Its events are time-critical (`watch(_:for:urgent:on:handler:)`).
        let urgent: Bool

        init(id: UInt64, fd: FileDescriptor, interest: Events, queue: DispatchQueue, urgent: Bool,
             handler: @escaping @Sendable (Events) -> Void) {
            self.id = id
            self.fd = fd
            self.queue = queue
            self.handler = handler
            self.urgent = urgent
            self.state = Locked(State(interest: interest))
        }
    }

    struct State: Sendable {
        /// Current interest; nil once cancelled.
        var interest: Events?
        /// An event was taken and its handler has not finished: the descriptor is disarmed until it has.
        var delivering = false
    }

    /// Set before `shared` is first used to have its loop run by the main thread (`runOnMainThread`).
    public static let onMainThread = Atomic<Bool>(false)

    /// The watcher the daemon uses; its thread starts on first use (unless `onMainThread`).
    public static let shared: IOWatcher = {
        do {
            return try IOWatcher(ownThread: !onMainThread.load(ordering: .acquiring))
        } catch {
            fatalError("cannot create the epoll instance: \(error)")
        }
    }()

    private let epoll: FileDescriptor
    private let registrations = Locked<[UInt64: Registration]>([:])
    private let nextID = Atomic<UInt64>(1)
    /// Written to wake the loop when a deadline earlier than the one it sleeps until is added.
    private let wake: FileDescriptor
    private let timers = Locked(Timers())

    /// Work waiting for its deadline (`after`). Few at a time (the daemon's gatherings of log lines, events
    /// and records: one per purpose), so a plain array.
    struct Timers: Sendable {
        var pending: [Timer] = []
        /// The instant `epoll_wait` sleeps until (`.max`: none) while the loop sleeps; 0 while it runs, when
        /// it looks at `pending` again before it sleeps.
        var sleepingUntil: UInt64 = 0
    }

    struct Timer: Sendable {
        /// When it may run, and when it must (`DispatchTime.uptimeNanoseconds`).
        let deadline, latest: UInt64
        let queue: DispatchQueue
        let work: @Sendable () -> Void
    }

    /// Registration ids of the loop's own descriptors (those of `watch` start at 1).
    private static let wakeID: UInt64 = .max
    private static let mainQueueID: UInt64 = .max - 1

    /// `ownThread` false: nothing runs the loop until `runOnMainThread`.
    public init(ownThread: Bool = true) throws(Errno) {
        epoll = FileDescriptor(rawValue: try checkResult(tsys_epoll_create()))
        wake = FileDescriptor(rawValue: try checkResult(tsys_eventfd()))
        _ = try checkResult(tsys_epoll_add_readable(epoll.rawValue, wake.rawValue, Self.wakeID))
        guard ownThread else { return }
        try CurrentProcess.detachThread { [self] in
            // Signals are the daemon's signal thread's to take (`sigwait`), never this one's.
            _ = tsys_thread_block_all_signals()
            run(drainingMainQueue: false)
        }
    }

    /// Starts watching `fd` for `events`; `handler` runs on `queue`. `urgent`: a wake for this descriptor
    /// does not also run the work waiting within its leeway (`after`), which waits for another wake or for
    /// its latest instant instead. For the registry's clock timers, whose handlers start commands on the
    /// loop's thread: on a host that packs tasks onto one CPU, a new child waits for whatever that thread
    /// does next (docs/performance.md, "Fire to command (round 12)").
    ///
    /// The corresponding C function is `epoll_ctl` (`EPOLL_CTL_ADD`).
    public func watch(
        _ fd: FileDescriptor, for events: Events, urgent: Bool = false, on queue: DispatchQueue,
        handler: @escaping @Sendable (Events) -> Void
    ) throws(Errno) -> Registration {
        let registration = Registration(
            id: nextID.wrappingAdd(1, ordering: .relaxed).oldValue, fd: fd, interest: events, queue: queue,
            urgent: urgent, handler: handler)
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

    /// Runs `work` on `queue` at `deadline`, or up to `leeway` later, as `queue.asyncAfter` would with a
    /// Dispatch timer's leeway, but from this loop: a Dispatch timer lives on libdispatch's manager thread,
    /// which woke once for each and then woke a worker. Here work for a queue the loop's thread drains runs
    /// without waking another thread, and with its leeway it runs when the loop next wakes for anything
    /// else but an urgent descriptor (a busy daemon's next run's end) instead of waking it once more.
    /// `epoll_wait`'s timeout has millisecond steps, so a deadline may also be a millisecond late: for
    /// gathering work together, not for jobs' timers (those are `TimerDescriptor`s).
    public func after(
        _ deadline: DispatchTime, leeway: Duration = .zero, on queue: DispatchQueue,
        execute work: @escaping @Sendable () -> Void
    ) {
        let slack = UInt64(max(0, leeway.components.seconds)) * 1_000_000_000
            + UInt64(max(0, leeway.components.attoseconds) / 1_000_000_000)
        let timer = Timer(deadline: deadline.uptimeNanoseconds, latest: deadline.uptimeNanoseconds &+ slack,
                          queue: queue, work: work)
        let wakeUp = timers.withLock { timers -> Bool in
            timers.pending.append(timer)
            return timer.latest < timers.sleepingUntil
        }
        if wakeUp { tsys_eventfd_signal(wake.rawValue) }
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

    /// Runs the loop on the calling thread, the main thread, for good: between events it also runs the
    /// work queued on the main Dispatch queue (and on the queues that target it). Call at most once.
    public func runOnMainThread() -> Never {
        guard tsys_epoll_add_readable(epoll.rawValue, tsys_main_queue_handle(), Self.mainQueueID) == 0 else {
            fatalError("cannot watch the main queue's descriptor: \(Errno(rawValue: errno))")
        }
        run(drainingMainQueue: true)
    }

    private func run(drainingMainQueue: Bool) -> Never {
        var buffers = EventBuffers()
        while true { runOnce(&buffers, drainingMainQueue: drainingMainQueue) }
    }

    struct EventBuffers {
        var ids = [UInt64](repeating: 0, count: 64)
        var events = [UInt32](repeating: 0, count: 64)
    }

    /// One turn of the loop: sleeps until a descriptor is ready or the earliest deadline comes, hands out
    /// what is ready and due, then (`drainingMainQueue`, on the main thread) runs what the main queue holds.
    private func runOnce(_ buffers: inout EventBuffers, drainingMainQueue: Bool) {
        let timeout = sleepTimeout()
        let count = buffers.ids.withUnsafeMutableBufferPointer { idBuffer in
            buffers.events.withUnsafeMutableBufferPointer { eventBuffer in
                tsys_epoll_wait(epoll.rawValue, idBuffer.baseAddress, eventBuffer.baseAddress, 64, timeout)
            }
        }
        let error = errno
        if count < 0, error != EINTR { fatalError("epoll_wait failed: \(Errno(rawValue: error))") }
        var urgent = false
        for index in 0..<max(0, Int(count)) {
            let id = buffers.ids[index]
            if id == Self.wakeID {
                tsys_eventfd_reset(wake.rawValue)
                continue
            }
            guard let registration = registrations.withLock({ $0[id] }) else { continue }
            urgent = urgent || registration.urgent
            // A second event while a handler run is pending can only come from an update that armed the
            // descriptor just before the first event was taken here: drop it. Nothing is lost, since
            // readiness is level-triggered: the re-arm after the handler reports what is still ready.
            let taken = registration.state.withLock { state -> Bool in
                guard state.interest != nil, !state.delivering else { return false }
                state.delivering = true
                return true
            }
            guard taken else { continue }
            let fired = Events(rawValue: buffers.events[index])
            registration.queue.async {
                // Cancelled after the event was taken: drop it (the fd may already be closed).
                guard registration.state.withLock({ $0.interest != nil }) else { return }
                registration.handler(fired)
                self.finishDelivery(registration)
            }
        }
        for timer in takeDue(early: !urgent) { timer.queue.async(execute: timer.work) }
        if drainingMainQueue { tsys_main_queue_drain() }
    }

    /// `epoll_wait`'s timeout for the earliest `latest` of the timers (-1: none), noted as the instant the
    /// loop sleeps until.
    private func sleepTimeout() -> Int32 {
        timers.withLock { timers -> Int32 in
            guard let earliest = timers.pending.lazy.map(\.latest).min() else {
                timers.sleepingUntil = .max
                return -1
            }
            timers.sleepingUntil = earliest
            let now = DispatchTime.now().uptimeNanoseconds
            guard earliest > now else { return 0 }
            // Rounded up: waking before it would only sleep again.
            return Int32(clamping: (earliest - now + 999_999) / 1_000_000)
        }
    }

    /// The timers whose deadline has come (`early`), or only those whose latest instant has, in deadline
    /// order, taken out; the loop is awake.
    private func takeDue(early: Bool) -> [Timer] {
        timers.withLock { timers in
            timers.sleepingUntil = 0
            guard !timers.pending.isEmpty else { return [] }
            let now = DispatchTime.now().uptimeNanoseconds
            let isDue: (Timer) -> Bool = { (early ? $0.deadline : $0.latest) <= now }
            let due = timers.pending.filter(isDue).sorted { $0.deadline < $1.deadline }
            if !due.isEmpty { timers.pending.removeAll(where: isDue) }
            return due
        }
    }
}
