import CTimerdSys

/// Giving memory an idle process no longer uses back to the kernel (docs/performance.md, "Idle resident
/// memory"). Called at events that already happen (the last control connection closed),
/// never on a timer.
public enum ResidentMemory {
    /// The free pages of every malloc arena, including those of threads that served a burst of requests
    /// (`malloc_trim(0)`). True if any memory was released.
    @discardableResult
    public static func trimMalloc() -> Bool { tsys_malloc_trim() == 1 }

}
