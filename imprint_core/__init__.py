"""imprint_core: a chat research loop that stops on progress and resource
budgets instead of a round count (ADR 0102 with amendments 0157 and 0159)."""
from .budget import POLICIES, LedgerTotals, RequestRecord, Reservation, TimeBudget, TokenBudget, TokenLedger
from .clock import MonotonicClock, VirtualClock
from .counting import DEFAULT_BYTES_PER_TOKEN, ByteEstimateCounter, RegexTokenCounter, common_prefix_len
from .errors import (BudgetExceeded, ImprintError, ProviderError, ScriptExhausted, SettingsError,
                     TokenBudgetExceeded, ToolAbandoned, UserInputError)
from .events import EVENT_TYPES, Event, event_from_line
from .files import atomic_write_text
from .final import FinalPlan
from .loop import LoopConfig, ResearchLoop, ResearchResult, WORKER_TOOL
from .novelty import NORMALIZATIONS, NoveltyConfig, NoveltyTracker, PatienceRule, normalize, segment
from .requests import ModelCaller, Reply
from .streams import Collected, collect
from .rounds import classify_round
from .providers.scripted import Chunk, ScriptedProvider, Turn, call
from .settings import SPECS, ResearchSettings, Settings, SettingSpec, validate
from .tools import FunctionTool, ToolExecutor
from .workers import SectionWorkers
from .trace import TRACE_FORMAT, EventLog, Trace, TraceWriter, read_trace
from .types import (CalibratedTokenCounter, CancelToken, Clock, CountingModes, Done, ErrorEvent, Evidence, FinalMode, Message,
                    ModelRequest, Provider, ProviderEvent, Stop, StopReason, TextDelta, TokenCounter, Tool, ToolCall, ToolCallEvent, ToolContext,
                    ToolOutput, ToolResult, ToolSpec, Usage, UsageEvent)

import types as _types

__all__ = sorted(n for n, v in dict(globals()).items()
                 if not n.startswith("_") and not isinstance(v, _types.ModuleType))
