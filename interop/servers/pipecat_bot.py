"""A pipecat text bot served over MCP by pipecat-mcp-transport (tools `start` and `chat`).

Its model is any OpenAI-compatible server (the interop suite gives `turnscope model serve`).
It registers one function, `echo`, so the scripted model calls it when a line names it; the
transport reports only the reply text, so a caller never learns of that call.

    python pipecat_bot.py --port 0 --model-url http://127.0.0.1:7861/v1

prints `pipecat bot ready: http://127.0.0.1:PORT/mcp` once it serves. With `--whisker-port P`
(0 = any free port) it also serves pipecat's whisker feed (`pipecat-ai-whisker`) on
`ws://127.0.0.1:P`, printed as `whisker: ws://127.0.0.1:P` on the ready line; like whisker's own
setup files, the feed's worker runs from the first session on (so its port opens only then),
and every session's pipeline worker gets its observer.
"""

import argparse
import asyncio
import socket

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.llm import OpenAILLMService
from pipecat_mcp_transport import McpBotServer, McpRunnerArguments


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--model-url", required=True, help="OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--whisker-port", type=int, default=None, help="serve whisker (0 = any free port)")
    args = parser.parse_args()

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    whisker = None
    whisker_port = None
    if args.whisker_port is not None:
        from pipecat_whisker import WhiskerServer

        whisker_port = args.whisker_port or free_port()
        whisker = WhiskerServer(host="127.0.0.1", port=whisker_port)
    whisker_runner = []

    async def echo(params: FunctionCallParams) -> None:
        await params.result_callback(str(params.arguments.get("text", "")))

    async def bot(runner_args: McpRunnerArguments) -> None:
        transport = runner_args.transport
        llm = OpenAILLMService(
            api_key="unused",
            base_url=args.model_url,
            settings=OpenAILLMService.Settings(model="scripted"),
        )
        llm.register_function("echo", echo)
        tools = ToolsSchema(
            standard_tools=[
                FunctionSchema(
                    name="echo",
                    description="Repeats the given text back.",
                    properties={"text": {"type": "string"}},
                    required=["text"],
                )
            ]
        )
        context = LLMContext(tools=tools)
        aggregators = LLMContextAggregatorPair(context)
        pipeline = Pipeline(
            [transport.input(), aggregators.user(), llm, transport.output(), aggregators.assistant()]
        )
        task = PipelineTask(pipeline)
        if whisker is not None:
            if not whisker_runner:
                runner = PipelineRunner(handle_sigint=False)
                await runner.add_workers(whisker)
                whisker_runner.append(asyncio.create_task(runner.run(auto_end=False)))
            task.add_observer(whisker.create_observer(task))
        await PipelineRunner(handle_sigint=False).run(task)

    port = args.port or free_port()
    server = McpBotServer(bot, port=port)
    line = f"pipecat bot ready: {server.url}"
    if whisker_port is not None:
        line += f" whisker: ws://127.0.0.1:{whisker_port}"
    print(line, flush=True)
    server.run()


if __name__ == "__main__":
    main()
