"""A pipecat text bot served over MCP by pipecat-mcp-transport (tools `start` and `chat`).

Its model is any OpenAI-compatible server (the interop suite gives `turnscope model serve`).
It registers one function, `echo`, so the scripted model calls it when a line names it; the
transport reports only the reply text, so a caller never learns of that call.

    python pipecat_bot.py --port 0 --model-url http://127.0.0.1:7861/v1

prints `pipecat bot ready: http://127.0.0.1:PORT/mcp` once it serves.
"""

import argparse
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
    args = parser.parse_args()

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
        await PipelineRunner(handle_sigint=False).run(PipelineTask(pipeline))

    port = args.port
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    server = McpBotServer(bot, port=port)
    print(f"pipecat bot ready: {server.url}", flush=True)
    server.run()


if __name__ == "__main__":
    main()
