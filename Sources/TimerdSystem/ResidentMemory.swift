import CTimerdSys

/// Giving memory an idle process no longer uses back to the kernel (docs/performance.md, "Idle resident
/// memory"). Called at events that already happen (start-up done, the last control connection closed),
/// never on a timer.
public enum ResidentMemory {
    /// The free pages of every malloc arena, including those of threads that served a burst of requests
    /// (`malloc_trim(0)`). True if any memory was released.
    @discardableResult
    public static func trimMalloc() -> Bool { tsys_malloc_trim() == 1 }

    /// Unmaps the resident pages of the read-only segments (code, read-only data) of the program and its
    /// libraries from this process (`MADV_DONTNEED`); they stay in the page cache and are mapped again,
    /// a minor fault per 64 KiB or so, when next used. The bytes advised.
    @discardableResult
    public static func dropReadOnlyPages() -> Int { Int(tsys_drop_readonly_pages()) }
}
